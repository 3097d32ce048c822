//! The PostgreSQL -> SQL Server direction: plan (pg_catalog introspection, type mapping, data
//! scans, collision checks), prepare (SQL Server tables), copy (binary COPY TO -> tiberius bulk
//! load, chunk + checkpoint per SQL Server transaction), finalize (keys, indexes, checks,
//! defaults, identity reseed, foreign keys) and verify (count / checksum in the canonical form of
//! [`crate::verify`]). Tasks, reports, options, checkpoint records and the summary are the ones the
//! SQL Server -> PostgreSQL direction uses.

use crate::checkpoint::SCHEMA;
use crate::conn_pool::{Pools, TdsConn};
use crate::copy_binary::RowEncoder;
use crate::engine::{DryRun, Engine, KeysBuilt, PartDigests, Prepared, VerifyPart, largest_tables_first};
use crate::mapping::{quote_mssql, quote_pg};
use crate::mapping_pg_to_mssql::{
    Decode, MsType, NumericScan, PgToMssqlColumn, PgToMssqlMappingError, map_column, needs_numeric_scan,
};
use crate::mssql::bulk::{BulkCtx, BulkError, row_encoder, write_chunks};
use crate::mssql::checkpoint::{self as mscp, MsCheckpointError};
use crate::mssql::connect::{
    ConnectError, MssqlEndpoint, REQUESTED_PACKET_SIZE, TdsClient, negotiated_packet_size,
};
use crate::mssql::ddl::{self, MsStmt};
use crate::mssql::read::hash_rows;
use crate::mssql::target_catalog::{existing_tables, ms_type_fit};
use crate::options::{Mode, Options, VerifyMode};
use crate::pg::connect::{PgConnectError, PgEndpoint, with_kept_connection_io};
use crate::pg::introspect::{PgIntrospectError, introspect};
use crate::pg::read::{PgReadError, SESSION_SETTINGS, VerifyColumns, read_task, verify_columns};
use crate::pg_model::PgTable;
use crate::pipeline::{CHANNEL_DEPTH, CopyOptions, Resume, Start, TaskReport, run_task};
use crate::plan::TaskPlan;
use crate::plan_pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan, TableNames};
use crate::retry::{AttemptState, failed_message};
use crate::target_check::{self, PlannedColumn, TableAction};
use crate::timeouts::{Stalled, stalled};
use crate::verify::{Digest, RowHasher};
use std::collections::{BTreeMap, HashMap};
use tokio::sync::mpsc;
use tokio_postgres::Client;

/// SQL Server's index key limit is 900 bytes for a clustered key: nvarchar(450).
pub const MAX_KEY_UNITS: i64 = 450;

#[derive(Debug, thiserror::Error)]
pub enum PgToMssqlError {
    #[error(transparent)]
    Source(#[from] PgConnectError),
    #[error(transparent)]
    Target(Box<ConnectError>),
    #[error(transparent)]
    Introspect(#[from] PgIntrospectError),
    #[error("table {table}: {source}")]
    Mapping {
        table: String,
        #[source]
        source: PgToMssqlMappingError,
    },
    #[error("table selection: {0}")]
    Pattern(String),
    #[error("table {0}: upsert needs a primary key to match rows on")]
    UpsertWithoutKey(String),
    #[error(transparent)]
    Merged(#[from] crate::plan::MergeCollision),
    #[error(
        "{scope}: {first:?} and {second:?} are the same name under SQL Server's case-insensitive collation; \
         rename one of them"
    )]
    NameCollision {
        scope: String,
        first: String,
        second: String,
    },
    #[error(
        "table {table}: {constraint} has rows that collide under SQL Server's case-insensitive collation \
         (and its trailing-space rule): ({values}) occurs {count} times; fix the data or exclude the table"
    )]
    KeyCollision {
        table: String,
        constraint: String,
        values: String,
        count: i64,
    },
    #[error("scanning {table}.{column} in PostgreSQL: {source}")]
    Scan {
        table: String,
        column: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("{what}: {source}\n  statement: {sql}")]
    Ddl {
        what: String,
        sql: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error(transparent)]
    Checkpoint(Box<MsCheckpointError>),
    #[error(transparent)]
    Read(#[from] PgReadError),
    #[error(transparent)]
    Bulk(Box<BulkError>),
    #[error("task {task}: {source}")]
    Task {
        task: String,
        #[source]
        source: Box<PgToMssqlError>,
    },
    #[error("{failed} of {total} copy tasks failed; first: {first}")]
    Tasks {
        failed: usize,
        total: usize,
        first: Box<PgToMssqlError>,
        /// Every task's report, the failed ones' included (what they left committed).
        reports: Vec<TaskReport>,
    },
    #[error("reader of task {0} panicked or was cancelled")]
    Join(String),
    #[error("no task named {0} in the plan")]
    NoSuchTask(String),
    #[error("stored plan of migration {0} cannot be read: {1}")]
    StoredPlan(String, String),
    #[error("verifying {table}: {message}")]
    Verify { table: String, message: String },
    #[error("nothing was written: {}", .0.join("; "))]
    Refused(Vec<String>),
    #[error("reading the target's catalog: {0}")]
    TargetCatalog(#[source] Box<crate::mssql::introspect::IntrospectError>),
    #[error("{0}")]
    Stalled(Stalled),
    /// The task's last attempt failed; `report` says what it left committed. The cause is part
    /// of the message, with its own causes, rather than a `source` (so it is printed once).
    #[error("{}: {}", failed_message(*.attempts, *.transient, *.committed), crate::error_text::error_text(.cause.as_ref()))]
    Failed {
        attempts: u32,
        transient: bool,
        /// Rows committed in total, when an attempt got as far as reading the checkpoint.
        committed: Option<i64>,
        report: Box<TaskReport>,
        cause: Box<PgToMssqlError>,
    },
}

impl PgToMssqlError {
    /// Whether another attempt may succeed (see [`crate::retry::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            PgToMssqlError::Stalled(_) => true,
            PgToMssqlError::Failed { .. } => false,
            other => crate::retry::is_transient(other),
        }
    }

    /// Whether running the step again cannot succeed: the plan refused the source's schema or the
    /// spec, the target was refused, or a copy met data it cannot write (see
    /// [`crate::retry::is_data_error`]).
    pub fn is_permanent(&self) -> bool {
        use PgToMssqlError::*;
        match self {
            Mapping { .. }
            | Pattern(_)
            | UpsertWithoutKey(_)
            | Merged(_)
            | NameCollision { .. }
            | KeyCollision { .. }
            | Refused(_) => true,
            Failed { transient, cause, .. } => !transient && cause.is_permanent(),
            Read(e) => e.is_data(),
            Task { source, .. } => source.is_permanent(),
            Tasks { failed, first, .. } => *failed == 1 && first.is_permanent(),
            other => crate::retry::is_data_error(other),
        }
    }

    /// What a failed task left committed.
    pub fn report(&self) -> Option<&TaskReport> {
        match self {
            PgToMssqlError::Failed { report, .. } => Some(report),
            PgToMssqlError::Task { source, .. } => source.report(),
            _ => None,
        }
    }

    /// The reports of a copy that failed: rows committed per task, failed tasks included.
    pub fn task_reports(&self) -> Vec<TaskReport> {
        match self {
            PgToMssqlError::Tasks { reports, .. } => reports.clone(),
            other => other.report().cloned().into_iter().collect(),
        }
    }
}

// The tiberius errors are large; boxing keeps `Result<_, PgToMssqlError>` small.
impl From<ConnectError> for PgToMssqlError {
    fn from(e: ConnectError) -> Self {
        PgToMssqlError::Target(Box::new(e))
    }
}

impl From<MsCheckpointError> for PgToMssqlError {
    fn from(e: MsCheckpointError) -> Self {
        PgToMssqlError::Checkpoint(Box::new(e))
    }
}

impl From<BulkError> for PgToMssqlError {
    fn from(e: BulkError) -> Self {
        PgToMssqlError::Bulk(Box::new(e))
    }
}

/// Case-insensitive namespace of SQL Server names.
struct CiNames {
    scope: String,
    used: HashMap<String, String>,
}

impl CiNames {
    fn new(scope: impl Into<String>) -> Self {
        CiNames {
            scope: scope.into(),
            used: HashMap::new(),
        }
    }

    fn claim(&mut self, name: &str) -> Result<String, PgToMssqlError> {
        let k = name.to_lowercase();
        if let Some(first) = self.used.get(&k) {
            return Err(PgToMssqlError::NameCollision {
                scope: self.scope.clone(),
                first: first.clone(),
                second: name.to_string(),
            });
        }
        self.used.insert(k, name.to_string());
        Ok(name.to_string())
    }

    /// Constraint names are schema-wide in SQL Server but per table in PostgreSQL: keep the name
    /// when free, else prefix the table's.
    fn claim_or_prefix(&mut self, table: &str, name: &str, warnings: &mut Vec<String>) -> String {
        if let Ok(n) = self.claim(name) {
            return n;
        }
        let mut candidate = format!("{table}_{name}");
        let mut i = 2;
        while self.used.contains_key(&candidate.to_lowercase()) {
            candidate = format!("{table}_{name}_{i}");
            i += 1;
        }
        warnings.push(format!(
            "table {table}: constraint {name:?} renamed to {candidate:?} (the name is already used in the schema, \
             case-insensitively)"
        ));
        self.used.insert(candidate.to_lowercase(), candidate.clone());
        candidate
    }
}

fn scan_err(t: &PgTable, column: &str) -> impl Fn(tokio_postgres::Error) -> PgToMssqlError {
    let table = t.qualified();
    let column = column.to_string();
    move |source| PgToMssqlError::Scan {
        table: table.clone(),
        column: column.clone(),
        source,
    }
}

fn pg_table(t: &PgTable) -> String {
    format!("{}.{}", quote_pg(&t.schema), quote_pg(&t.name))
}

async fn numeric_scan(pg: &Client, t: &PgTable, column: &str) -> Result<NumericScan, PgToMssqlError> {
    let c = quote_pg(column);
    let normal = format!("{c} NOT IN ('NaN'::numeric, 'Infinity'::numeric, '-Infinity'::numeric)");
    let sql = format!(
        "SELECT coalesce(max(length(trunc(abs({c}))::text)) FILTER (WHERE {normal}), 0)::int,
                coalesce(max(scale({c})) FILTER (WHERE {normal}), 0)::int,
                coalesce(bool_or(NOT ({normal})), false)
         FROM {}",
        pg_table(t)
    );
    let r = pg.query_one(&sql, &[]).await.map_err(scan_err(t, column))?;
    Ok(NumericScan {
        int_digits: r.get(0),
        scale: r.get(1),
        special: r.get(2),
    })
}

/// The longest value in UTF-16 code units (characters outside the BMP count twice).
async fn longest_text(pg: &Client, t: &PgTable, column: &str) -> Result<i64, PgToMssqlError> {
    let c = quote_pg(column);
    let sql = format!(
        "SELECT coalesce(max(length({c}::text) + length(regexp_replace({c}::text, '[\\u0001-\\uFFFF]', '', 'g'))), 0)::bigint FROM {}",
        pg_table(t)
    );
    let r = pg.query_one(&sql, &[]).await.map_err(scan_err(t, column))?;
    Ok(r.get(0))
}

/// Rows of a key that are equal under a case-insensitive, trailing-space-insensitive collation.
async fn key_collision(
    pg: &Client,
    t: &PgTable,
    mapped: &[PgToMssqlColumn],
    constraint: &str,
    columns: &[String],
    nulls_distinct: bool,
) -> Result<(), PgToMssqlError> {
    let texty = |n: &String| {
        mapped
            .iter()
            .find(|c| &c.source.name == n)
            .is_some_and(|c| matches!(c.decode, Decode::Text { .. }))
    };
    if !columns.iter().any(texty) {
        return Ok(());
    }
    let exprs: Vec<String> = columns
        .iter()
        .map(|n| {
            if texty(n) {
                format!("lower(rtrim({}::text))", quote_pg(n))
            } else {
                format!("{}::text", quote_pg(n))
            }
        })
        .collect();
    // NULLs distinct (PostgreSQL's default): the SQL Server key is a filtered index over the rows
    // without NULLs in it (mssql::ddl::finalize_table), so only those rows can collide.
    let filter = if nulls_distinct {
        format!(
            " WHERE {}",
            columns
                .iter()
                .map(|n| format!("{} IS NOT NULL", quote_pg(n)))
                .collect::<Vec<_>>()
                .join(" AND ")
        )
    } else {
        String::new()
    };
    let sql = format!(
        "SELECT concat_ws(', ', {e}), count(*) FROM {}{filter} GROUP BY {e} HAVING count(*) > 1 LIMIT 1",
        pg_table(t),
        e = exprs.join(", ")
    );
    if let Some(r) = pg
        .query_opt(&sql, &[])
        .await
        .map_err(scan_err(t, &columns.join(", ")))?
    {
        return Err(PgToMssqlError::KeyCollision {
            table: t.qualified(),
            constraint: constraint.to_string(),
            values: r.get::<_, Option<String>>(0).unwrap_or_default(),
            count: r.get(1),
        });
    }
    Ok(())
}

fn keyable(d: Decode) -> bool {
    !matches!(
        d,
        Decode::Bool | Decode::Float4 | Decode::Float8 | Decode::Bytea | Decode::Time { .. }
    )
}

/// The table's columns mapped to SQL Server types, with the data scans the mapping needs
/// (unbounded numerics, text columns that are index keys).
async fn map_columns(
    pg: &Client,
    t: &PgTable,
    warnings: &mut Vec<String>,
) -> Result<Vec<PgToMssqlColumn>, PgToMssqlError> {
    let q = t.qualified();
    let mut cols = CiNames::new(format!("columns of table {q}"));
    // Columns that are (part of) an index key need a sized nvarchar.
    let mut key_cols: Vec<&String> = Vec::new();
    if let Some(pk) = &t.primary_key {
        key_cols.extend(pk.columns.iter());
    }
    for u in &t.unique {
        key_cols.extend(u.columns.iter());
    }
    for ix in &t.indexes {
        key_cols.extend(ix.columns.iter().map(|(c, _)| c));
    }
    let mut columns = Vec::new();
    for c in &t.columns {
        cols.claim(&c.name)?;
        let scan = if needs_numeric_scan(c) {
            Some(numeric_scan(pg, t, &c.name).await?)
        } else {
            None
        };
        let mut w = Vec::new();
        let mut m = map_column(c, scan, &mut w).map_err(|source| PgToMssqlError::Mapping {
            table: q.clone(),
            source,
        })?;
        if m.ms_type == (MsType::NVarChar { length: None }) && key_cols.contains(&&c.name) {
            let longest = longest_text(pg, t, &c.name).await?;
            if longest <= MAX_KEY_UNITS {
                let n = longest.max(1) as u32;
                // Headroom for new rows: at least 100 units, within the key limit.
                let n = n.max(100).min(MAX_KEY_UNITS as u32);
                w.push(format!(
                    "column {}: {} is an index key; nvarchar(max) cannot be, so it becomes nvarchar({n}) \
                     (longest value: {longest})",
                    c.name, c.formatted
                ));
                m.ms_type = MsType::NVarChar { length: Some(n) };
                m.decode = Decode::Text { max_units: Some(n) };
            }
        }
        warnings.extend(w.into_iter().map(|w| format!("table {q}: {w}")));
        columns.push(m);
    }
    Ok(columns)
}

/// Generated columns become computed PERSISTED columns where their expression translates.
fn computed_columns(t: &PgTable, columns: &mut [PgToMssqlColumn], warnings: &mut Vec<String>) {
    let q = t.qualified();
    // A generated column refers to stored columns only.
    let stored: Vec<(String, crate::mssql::expr::Operand)> = columns
        .iter()
        .filter(|c| c.source.generated.is_none())
        .map(|c| {
            let kind = crate::mssql::expr::column_operand(&c.source, c.ms_type);
            (c.source.name.clone(), kind)
        })
        .collect();
    for col in columns.iter_mut() {
        let Some(expr) = col.source.generated.clone() else {
            continue;
        };
        let lookup = |n: &str| stored.iter().find(|(s, _)| s == n).cloned();
        let name = col.source.name.clone();
        match crate::mssql::expr::translate(
            &expr,
            &crate::mssql::expr::Ctx {
                columns: &lookup,
                qualified: None,
                column_type: Some(col.ms_type),
            },
        ) {
            Ok(tsql) => {
                warnings.push(format!(
                    "table {q}: generated column {name} becomes the computed column AS ({tsql}) PERSISTED"
                ));
                col.computed = Some(tsql);
            }
            Err(e) => warnings.push(format!(
                "table {q}: generated column {name} ({expr}) is copied as plain values: its expression \
                 could not be translated ({e})"
            )),
        }
    }
}

/// Refuses a table whose unique keys would collide under SQL Server's case-insensitive,
/// trailing-space-insensitive comparison.
async fn check_key_collisions(
    pg: &Client,
    t: &PgTable,
    columns: &[PgToMssqlColumn],
) -> Result<(), PgToMssqlError> {
    if let Some(pk) = &t.primary_key {
        key_collision(
            pg,
            t,
            columns,
            &format!("primary key {}", pk.name),
            &pk.columns,
            false,
        )
        .await?;
    }
    for u in &t.unique {
        key_collision(
            pg,
            t,
            columns,
            &format!("unique constraint {}", u.name),
            &u.columns,
            !u.nulls_not_distinct,
        )
        .await?;
    }
    for ix in t.indexes.iter().filter(|ix| ix.unique && ix.expression.is_none()) {
        let cols: Vec<String> = ix.columns.iter().map(|(c, _)| c.clone()).collect();
        key_collision(
            pg,
            t,
            columns,
            &format!("unique index {}", ix.name),
            &cols,
            !ix.nulls_not_distinct,
        )
        .await?;
    }
    Ok(())
}

/// The primary key's columns, when every one can drive keyset paging.
fn keyset_key(t: &PgTable, columns: &[PgToMssqlColumn]) -> Option<Vec<usize>> {
    t.primary_key.as_ref().and_then(|pk| {
        pk.columns
            .iter()
            .map(|n| {
                let i = columns.iter().position(|c| &c.source.name == n)?;
                keyable(columns[i].decode).then_some(i)
            })
            .collect::<Option<Vec<_>>>()
    })
}

/// SQL Server names of the table's constraints (schema-scoped there: a taken one gets the table's
/// name as prefix).
fn constraint_names(
    t: &PgTable,
    columns: &[PgToMssqlColumn],
    constraints: &mut CiNames,
    warnings: &mut Vec<String>,
) -> TableNames {
    let tn = t.name.clone();
    let mut n = TableNames {
        pk: t
            .primary_key
            .as_ref()
            .map(|pk| constraints.claim_or_prefix(&tn, &pk.name, warnings))
            .unwrap_or_default(),
        ..TableNames::default()
    };
    for u in &t.unique {
        n.unique.push(constraints.claim_or_prefix(&tn, &u.name, warnings));
    }
    for ck in &t.checks {
        n.checks
            .push(constraints.claim_or_prefix(&tn, &ck.name, warnings));
    }
    for fk in &t.foreign_keys {
        n.fks.push(constraints.claim_or_prefix(&tn, &fk.name, warnings));
    }
    for c in columns {
        n.column_checks.push(
            c.check
                .as_ref()
                .map(|_| constraints.claim_or_prefix(&tn, &format!("CK_{tn}_{}", c.source.name), warnings)),
        );
        n.defaults.push(
            c.source
                .default
                .as_ref()
                .map(|_| constraints.claim_or_prefix(&tn, &format!("DF_{tn}_{}", c.source.name), warnings)),
        );
    }
    n
}

/// Selects, maps and names the tables; scans the data where the mapping depends on it.
pub async fn build_plan(
    pg: &Client,
    source: Vec<PgTable>,
    opts: &Options,
) -> Result<PgToMssqlPlan, PgToMssqlError> {
    let selected = crate::plan::select_tables(source, opts, |t| (&t.schema, &t.name))
        .map_err(PgToMssqlError::Pattern)?;
    let mut warnings = Vec::new();
    // Object names are unique per schema in SQL Server, compared case-insensitively.
    let mut namespaces: BTreeMap<String, (CiNames, CiNames)> = BTreeMap::new();
    let mut tables = Vec::new();
    let mut names = Vec::new();
    let mut merged = crate::plan::MergedTables::default();
    warnings.extend(crate::plan::unused_schema_map_warnings(
        opts,
        selected.iter().map(|t| t.schema.as_str()),
        false,
    ));
    for t in selected {
        let q = t.qualified();
        let target_schema = crate::plan_pg_to_mssql::target_schema_of(&t.schema, opts);
        merged.claim((&t.schema, &t.name), (&target_schema, &t.name), true)?;
        let (table_names, constraints) =
            namespaces.entry(target_schema.to_lowercase()).or_insert_with(|| {
                (
                    CiNames::new(format!("tables of schema {target_schema}")),
                    CiNames::new(format!("constraints of schema {target_schema}")),
                )
            });
        table_names.claim(&t.name)?;
        let mut columns = map_columns(pg, &t, &mut warnings).await?;
        computed_columns(&t, &mut columns, &mut warnings);
        check_key_collisions(pg, &t, &columns).await?;
        let key = keyset_key(&t, &columns);
        if opts.mode == Mode::Upsert && t.primary_key.is_none() {
            return Err(PgToMssqlError::UpsertWithoutKey(q));
        }
        if key.is_none() {
            warnings.push(format!(
                "table {q}: no primary key usable for keyset paging; it is copied in one transaction and \
                 restarted from scratch if interrupted"
            ));
        }
        names.push(constraint_names(&t, &columns, constraints, &mut warnings));
        tables.push(PgToMssqlTablePlan {
            target_name: t.name.clone(),
            source: t,
            target_schema,
            columns,
            key,
        });
    }
    let tasks = crate::plan::whole_table_tasks(
        tables
            .iter()
            .map(|t| (t.task_base_name(), t.source.row_count, t.source.size_bytes)),
    );
    Ok(PgToMssqlPlan {
        tables,
        names,
        tasks,
        warnings,
        views: Vec::new(),
    })
}

#[derive(Clone)]
pub struct PgToMssqlEngine {
    /// The PostgreSQL source (connection settings).
    pub source: PgEndpoint,
    /// The SQL Server target (connection settings).
    pub target: MssqlEndpoint,
    pub options: Options,
    pub copy: CopyOptions,
}

fn ddl_err(what: &str, sql: &str) -> impl Fn(tiberius::error::Error) -> PgToMssqlError {
    let what = what.to_string();
    let sql = sql.to_string();
    move |source| PgToMssqlError::Ddl {
        what: what.clone(),
        sql: sql.clone(),
        source: Box::new(source),
    }
}

async fn ms_batch(ms: &mut TdsClient, what: &str, sql: &str) -> Result<(), PgToMssqlError> {
    ms.simple_query(sql)
        .await
        .map_err(ddl_err(what, sql))?
        .into_results()
        .await
        .map_err(ddl_err(what, sql))?;
    Ok(())
}

/// "Already there" errors, so finalize can be rerun: object exists, PK exists, index exists,
/// column already has a default (8110: the test server's code for an existing primary key).
fn already_done(e: &tiberius::error::Error) -> bool {
    matches!(e, tiberius::error::Error::Server(t) if matches!(t.code(), 2714 | 1779 | 1913 | 1781 | 8110))
}

fn server_message(e: &tiberius::error::Error) -> String {
    match e {
        tiberius::error::Error::Server(t) => t.message().to_string(),
        other => other.to_string(),
    }
}

async fn exec_stmts(
    ms: &mut TdsClient,
    stmts: Vec<MsStmt>,
    warnings: &mut Vec<String>,
) -> Result<(), PgToMssqlError> {
    for s in stmts {
        let r = match ms.simple_query(s.sql.as_str()).await {
            Ok(stream) => stream.into_results().await.map(|_| ()),
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {}
            Err(e) if already_done(&e) => {}
            Err(e) if s.optional => warnings.push(format!(
                "{} not migrated: SQL Server rejected the translation: {} ({})",
                s.what,
                server_message(&e),
                s.sql
            )),
            Err(source) => {
                return Err(PgToMssqlError::Ddl {
                    what: s.what,
                    sql: s.sql,
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(())
}

async fn scalar_i64(ms: &mut TdsClient, sql: &str) -> Result<Option<i64>, PgToMssqlError> {
    let row = ms
        .simple_query(sql)
        .await
        .map_err(ddl_err("query", sql))?
        .into_row()
        .await
        .map_err(ddl_err("query", sql))?;
    Ok(row.and_then(|r| {
        r.try_get::<i64, _>(0)
            .ok()
            .flatten()
            .or_else(|| r.try_get::<i32, _>(0).ok().flatten().map(i64::from))
    }))
}

impl PgToMssqlEngine {
    /// Introspects the source and builds the plan, with partitions for large tables.
    pub async fn plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        let pg = self.source.connect().await?;
        let mut tables = Vec::new();
        let mut modules = Vec::new();
        for schema in self.source_schemas(&pg).await? {
            tables.extend(introspect(&pg, &schema).await?);
            modules.extend(crate::pg::introspect::modules(&pg, &schema).await?);
        }
        let mut plan = build_plan(&pg, tables, &self.options).await?;
        crate::views::plan_views_pg_to_mssql(&mut plan, &modules, &|s| {
            crate::plan_pg_to_mssql::target_schema_of(s, &self.options)
        });
        let mut bounds = BTreeMap::new();
        for (i, t) in plan.tables.iter().enumerate() {
            if t.source.row_count >= self.options.partitioning.min_rows_to_split
                && let Some(k) = t.int_key()
            {
                let c = quote_pg(&t.columns[k].source.name);
                let sql = format!(
                    "SELECT min({c})::bigint, max({c})::bigint FROM {}",
                    pg_table(&t.source)
                );
                let r = pg
                    .query_one(&sql, &[])
                    .await
                    .map_err(scan_err(&t.source, &t.columns[k].source.name))?;
                if let (Some(lo), Some(hi)) = (r.get::<_, Option<i64>>(0), r.get::<_, Option<i64>>(1)) {
                    bounds.insert(i, (lo, hi));
                }
            }
        }
        plan.tasks = crate::plan::split_task_list(std::mem::take(&mut plan.tasks), &bounds, &self.options);
        plan.warnings
            .extend(self.source.plaintext_warning(&pg, "source.postgres").await);
        Ok(plan)
    }

    /// The source schemas to read: `source_schema`, or those `source.*.schemas` selects.
    async fn source_schemas(&self, pg: &Client) -> Result<Vec<String>, PgToMssqlError> {
        if self.options.source_schemas.is_empty() {
            return Ok(vec![self.options.source_schema.clone()]);
        }
        let mut out = Vec::new();
        for schema in crate::pg::introspect::user_schemas(pg).await? {
            if crate::plan::schema_selected(&self.options, &schema)
                .map_err(|e| PgToMssqlError::Pattern(e.to_string()))?
            {
                out.push(schema);
            }
        }
        Ok(out)
    }

    async fn connect_target(&self) -> Result<(TdsClient, Option<i32>), PgToMssqlError> {
        let (mut ms, granted) = self.target.connect_reporting_packet_size().await?;
        let packet = match granted {
            Some(size) => i32::try_from(size).ok(),
            None => negotiated_packet_size(&mut ms).await,
        };
        Ok((ms, packet))
    }

    async fn table_exists(ms: &mut TdsClient, t: &PgToMssqlTablePlan) -> Result<bool, PgToMssqlError> {
        let name = ddl::qualified(t).replace('\'', "''");
        Ok(scalar_i64(ms, &format!("SELECT OBJECT_ID(N'{name}', N'U')"))
            .await?
            .is_some())
    }

    /// Drops the foreign keys of the migration's own tables that reference a table (finalize
    /// recreates them) and those of other tables the user allowed to go (`dropDependents`; their
    /// statements were saved for finalize), so it can be dropped or truncated.
    async fn drop_referencing_fks(ms: &mut TdsClient, t: &PgToMssqlTablePlan) -> Result<(), PgToMssqlError> {
        let name = ddl::qualified(t).replace('\'', "''");
        let sql = format!(
            "SELECT fk.name, OBJECT_SCHEMA_NAME(fk.parent_object_id), OBJECT_NAME(fk.parent_object_id) \
             FROM sys.foreign_keys fk WHERE fk.referenced_object_id = OBJECT_ID(N'{name}')"
        );
        let rows = ms
            .simple_query(sql.as_str())
            .await
            .map_err(ddl_err("foreign key lookup", &sql))?
            .into_first_result()
            .await
            .map_err(ddl_err("foreign key lookup", &sql))?;
        let fks: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get::<&str, _>(0).unwrap_or_default().to_string(),
                    r.get::<&str, _>(1).unwrap_or_default().to_string(),
                    r.get::<&str, _>(2).unwrap_or_default().to_string(),
                )
            })
            .collect();
        for (fk, s, tab) in fks {
            let drop = format!(
                "ALTER TABLE {}.{} DROP CONSTRAINT {}",
                quote_mssql(&s),
                quote_mssql(&tab),
                quote_mssql(&fk)
            );
            ms_batch(ms, "drop foreign key", &drop).await?;
        }
        Ok(())
    }

    /// What a run would do to each target table, from the target's catalog (reads only).
    async fn target_actions(
        &self,
        ms: &mut TdsClient,
        plan: &PgToMssqlPlan,
    ) -> Result<Vec<TableAction>, PgToMssqlError> {
        let mut existing = vec![None; plan.tables.len()];
        let schemas: std::collections::BTreeSet<&str> =
            plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
        for schema in schemas {
            let (index, names): (Vec<usize>, Vec<String>) = plan
                .tables
                .iter()
                .enumerate()
                .filter(|(_, t)| t.target_schema == schema)
                .map(|(i, t)| (i, t.target_name.clone()))
                .unzip();
            let found = existing_tables(ms, schema, &names)
                .await
                .map_err(|e| PgToMssqlError::TargetCatalog(Box::new(e)))?;
            for (i, mut f) in index.into_iter().zip(found) {
                // The plan's own views of a previous run are dropped and created again.
                if let Some(e) = f.as_mut() {
                    e.dependents
                        .retain(|d| !(d.kind == "view" && crate::views::is_own_mssql_view(plan, &d.name)));
                }
                existing[i] = f;
            }
        }
        Ok(plan
            .tables
            .iter()
            .zip(&existing)
            .map(|(t, found)| {
                let planned: Vec<PlannedColumn> = t
                    .columns
                    .iter()
                    .map(|c| PlannedColumn {
                        name: c.target_name.clone(),
                        type_name: c.ms_type.to_string(),
                        nullable: c.source.nullable,
                    })
                    .collect();
                let key: Option<Vec<String>> = t
                    .key
                    .as_ref()
                    .map(|k| k.iter().map(|i| t.columns[*i].target_name.clone()).collect());
                target_check::decide(
                    self.options.mode,
                    found.as_ref(),
                    &planned,
                    key.as_deref(),
                    self.options.drop_dependents,
                    |i, found| ms_type_fit(t.columns[i].ms_type, found),
                )
            })
            .collect())
    }

    /// Plans and says what a run would do to the target, writing nothing.
    pub async fn dry_run(&self) -> Result<DryRun<PgToMssqlPlan>, PgToMssqlError> {
        let plan = self.plan().await?;
        let (mut ms, packet) = self.connect_target().await?;
        let actions = self.target_actions(&mut ms, &plan).await?;
        Ok(DryRun {
            plan,
            actions,
            negotiated_packet_size: packet,
        })
    }

    /// Plans, then creates the target tables, unless a previous incomplete run of the same plan
    /// exists: then its tables, checkpoints and task ranges are kept and copying resumes.
    /// Nothing is written before every table's existing target has been checked.
    pub async fn prepare(&self) -> Result<Prepared<PgToMssqlPlan>, PgToMssqlError> {
        let mut plan = self.plan().await?;
        let (mut ms, packet) = self.connect_target().await?;
        let migration = &self.options.migration;
        let fingerprint = plan.fingerprint();
        if mscp::tables_exist(&mut ms).await?
            && let Some((fp, state, Some(tasks))) = mscp::run_state(&mut ms, migration).await?
            && fp == fingerprint
            && state == "copying"
            && let Ok(tasks) = serde_json::from_str::<Vec<TaskPlan>>(&tasks)
        {
            let mut all = true;
            for t in &plan.tables {
                all &= Self::table_exists(&mut ms, t).await?;
            }
            if all {
                // A resumed run may find the state tables of an older worker.
                mscp::ensure_tables(&mut ms).await?;
                plan.tasks = tasks;
                return Ok(Prepared {
                    plan,
                    resumed: true,
                    negotiated_packet_size: packet,
                });
            }
        }
        let actions = self.target_actions(&mut ms, &plan).await?;
        let refused = target_check::refusals(plan.tables.iter().map(ddl::qualified), &actions);
        if !refused.is_empty() {
            return Err(PgToMssqlError::Refused(refused));
        }
        mscp::ensure_tables(&mut ms).await?;
        let recreate: Vec<String> = actions
            .iter()
            .flat_map(|a| match a {
                TableAction::Drop { dependents, .. } | TableAction::Truncate { dependents, .. } => {
                    dependents.iter().filter_map(|d| d.recreate.clone()).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        mscp::save_recreate(&mut ms, migration, &recreate).await?;
        let schemas: std::collections::BTreeSet<&str> =
            plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
        for schema in schemas {
            let literal = schema.replace('\'', "''");
            if scalar_i64(&mut ms, &format!("SELECT SCHEMA_ID(N'{literal}')"))
                .await?
                .is_none()
            {
                let sql = format!("CREATE SCHEMA {}", quote_mssql(schema));
                ms_batch(&mut ms, "target schema", &sql).await?;
            }
        }
        let identity = self.options.schema.identity;
        for sql in crate::views::mssql_drop_statements(&plan) {
            ms_batch(&mut ms, "the migration's views", &sql).await?;
        }
        let mut dropped_views = Vec::new();
        for (t, action) in plan.tables.iter().zip(&actions) {
            let what = format!("table {}", ddl::qualified(t));
            match action {
                TableAction::Create => {
                    ms_batch(&mut ms, &what, &ddl::create_table(t, identity)).await?;
                }
                TableAction::Drop { dependents, .. } => {
                    // Views the user allowed to go (dropDependents): a schema-bound one would
                    // stop the drop, another would be left reading a different table.
                    for d in dependents.iter().filter(|d| d.kind == "view") {
                        let (vs, vn) = d.name.split_once('.').unwrap_or(("dbo", d.name.as_str()));
                        let sql = format!("DROP VIEW {}.{}", quote_mssql(vs), quote_mssql(vn));
                        ms_batch(&mut ms, &format!("view {}", d.name), &sql).await?;
                        dropped_views.push(format!(
                            "table {}: view {} depended on it and was dropped (dropDependents); its definition: {}",
                            ddl::qualified(t),
                            d.name,
                            d.definition
                        ));
                    }
                    Self::drop_referencing_fks(&mut ms, t).await?;
                    ms_batch(&mut ms, &what, &ddl::drop_table(t)).await?;
                    ms_batch(&mut ms, &what, &ddl::create_table(t, identity)).await?;
                }
                TableAction::Truncate { .. } => {
                    Self::drop_referencing_fks(&mut ms, t).await?;
                    ms_batch(&mut ms, &what, &format!("TRUNCATE TABLE {}", ddl::qualified(t))).await?;
                }
                TableAction::Upsert { .. } | TableAction::Refuse { .. } => {}
            }
        }
        plan.warnings.extend(dropped_views);
        mscp::reset(&mut ms, migration).await?;
        let tasks = serde_json::to_string(&plan.tasks).unwrap_or_default();
        mscp::set_run_state(&mut ms, migration, &fingerprint, "copying", Some(&tasks)).await?;
        Ok(Prepared {
            plan,
            resumed: false,
            negotiated_packet_size: packet,
        })
    }

    /// The plan of the current run with the task ranges stored by `prepare`.
    pub async fn stored_plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        let mut plan = self.plan().await?;
        let (mut ms, _) = self.connect_target().await?;
        mscp::ensure_tables(&mut ms).await?;
        match mscp::run_state(&mut ms, &self.options.migration).await? {
            Some((fp, _, Some(tasks))) if fp == plan.fingerprint() => {
                plan.tasks = serde_json::from_str(&tasks)
                    .map_err(|e| PgToMssqlError::StoredPlan(self.options.migration.clone(), e.to_string()))?;
                Ok(plan)
            }
            _ => Err(PgToMssqlError::StoredPlan(
                self.options.migration.clone(),
                "no prepared run with the current source schema; run `plan` first".into(),
            )),
        }
    }

    /// Keys, indexes, checks, defaults and identity per table, then foreign keys. Safe to rerun.
    /// Nobody waits for the tables' keys ([`Self::finalize_reporting`]).
    pub async fn finalize(&self, plan: &PgToMssqlPlan) -> Result<Vec<String>, PgToMssqlError> {
        self.finalize_reporting(plan, &KeysBuilt::all_built()).await
    }

    /// [`Engine::finalize`]: `keys` learns of each table once its keys are built.
    pub async fn finalize_reporting(
        &self,
        plan: &PgToMssqlPlan,
        keys: &KeysBuilt,
    ) -> Result<Vec<String>, PgToMssqlError> {
        let (mut ms, _) = self.connect_target().await?;
        let pg = self.source.connect().await?;
        let mut warnings = Vec::new();
        for i in largest_tables_first(plan.tables.len(), &plan.tasks) {
            let (t, names) = (&plan.tables[i], &plan.names[i]);
            let referenced = ddl::referenced_keys(plan, t);
            let stmts = ddl::finalize_table(t, &self.options.schema, names, &referenced, &mut warnings);
            exec_stmts(&mut ms, stmts, &mut warnings).await?;
            if self.options.schema.identity {
                self.reseed(&mut ms, &pg, t).await?;
            }
            keys.table(i);
        }
        // Adding a foreign key (ours, or one of a table outside the migration recreated below)
        // takes the tables' schema-modify lock, which a verification read of either holds up,
        // and holds up the reads in turn: the rest of finalize waits for the verification beside.
        keys.wait_for_verification().await;
        if self.options.schema.foreign_keys {
            let fks = ddl::foreign_keys(plan, &mut warnings);
            exec_stmts(&mut ms, fks, &mut warnings).await?;
        }
        exec_stmts(
            &mut ms,
            crate::views::mssql_create_statements(plan),
            &mut warnings,
        )
        .await?;
        let recreate = mscp::recreate_statements(&mut ms, &self.options.migration)
            .await?
            .into_iter()
            .map(|sql| MsStmt {
                what: "foreign key of a table outside the migration (dropped by dropDependents)".into(),
                sql,
                optional: true,
            })
            .collect();
        exec_stmts(&mut ms, recreate, &mut warnings).await?;
        mscp::clear_recreate(&mut ms, &self.options.migration).await?;
        mscp::set_run_state(
            &mut ms,
            &self.options.migration,
            &plan.fingerprint(),
            "finalized",
            None,
        )
        .await?;
        Ok(warnings)
    }

    /// Sets the identity past both the copied maximum and the source sequence's last value.
    async fn reseed(
        &self,
        ms: &mut TdsClient,
        pg: &Client,
        t: &PgToMssqlTablePlan,
    ) -> Result<(), PgToMssqlError> {
        let Some(c) = t.columns.iter().find(|c| c.identity) else {
            return Ok(());
        };
        let max = scalar_i64(
            ms,
            &format!(
                "SELECT CAST(MAX({}) AS bigint) FROM {}",
                quote_mssql(&c.target_name),
                ddl::qualified(t)
            ),
        )
        .await?;
        let mut next_after = max;
        if let Some(seq) = &c.source.sequence {
            // pg_sequence_last_value is NULL until the sequence was used.
            let r = pg
                .query_one("SELECT pg_sequence_last_value($1::text::regclass)", &[seq])
                .await
                .map_err(scan_err(&t.source, &c.source.name))?;
            if let Some(last) = r.get::<_, Option<i64>>(0) {
                next_after = Some(next_after.map_or(last, |m| m.max(last)));
            }
        }
        if let Some(n) = next_after {
            let name = ddl::qualified(t).replace('\'', "''");
            let sql = format!("DBCC CHECKIDENT (N'{name}', RESEED, {n})");
            ms_batch(ms, &format!("identity of {}", t.source.qualified()), &sql).await?;
        }
        Ok(())
    }

    pub async fn mark_succeeded(&self, plan: &PgToMssqlPlan) -> Result<(), PgToMssqlError> {
        let (mut ms, _) = self.connect_target().await?;
        mscp::set_run_state(
            &mut ms,
            &self.options.migration,
            &plan.fingerprint(),
            "succeeded",
            None,
        )
        .await?;
        Ok(())
    }
}

/// Copies one task, resuming after its checkpoint when there is one, and again from the
/// checkpoint after a transient fault (see [`CopyOptions::retry`]).
pub async fn copy_task(
    engine: &PgToMssqlEngine,
    t: &PgToMssqlTablePlan,
    task: &TaskPlan,
    pools: &Pools,
) -> Result<TaskReport, PgToMssqlError> {
    let state = AttemptState::default();
    run_task(
        &engine.copy.retry,
        &task.name,
        t.source.qualified(),
        &state,
        || copy_attempt(engine, t, task, pools, &state),
        PgToMssqlError::is_transient,
    )
    .await
    .map_err(|f| PgToMssqlError::Failed {
        attempts: f.attempts,
        transient: f.transient,
        committed: f.committed,
        report: Box::new(f.report),
        cause: Box::new(f.cause),
    })
}

/// One attempt of [`copy_task`]. Its connections come from `pools` and go back there only when
/// it succeeds; an error drops them (closing a connection rolls back its open transaction).
async fn copy_attempt(
    engine: &PgToMssqlEngine,
    t: &PgToMssqlTablePlan,
    task: &TaskPlan,
    pools: &Pools,
    state: &AttemptState,
) -> Result<TaskReport, PgToMssqlError> {
    let migration = &engine.options.migration;
    let TdsConn {
        client: mut ms,
        watch: ms_watch,
    } = pools.mssql(&engine.target).await?;
    let cp = mscp::load(&mut ms, migration, &task.name)
        .await?
        .unwrap_or_default();
    let resume = match Resume::from_checkpoint(cp, t.key.is_some(), task, t.source.qualified(), state) {
        Start::Done(report) => {
            pools.give_back_mssql(TdsConn {
                client: ms,
                watch: ms_watch,
            });
            return Ok(report);
        }
        Start::From(resume) => resume,
    };
    let (after, committed_rows) = (resume.after.clone(), resume.committed_rows);

    // Its I/O is polled by this task together with the reader and writer below.
    let mut pg = pools.pg_undriven(&engine.source).await?;

    let identity = engine.options.schema.identity;
    let upsert = engine.copy.mode == Mode::Upsert;
    let (load_table, merge_sql) = if upsert {
        let stage = ddl::stage_name(t, &task.name);
        ms_batch(&mut ms, "staging table", &ddl::create_stage(t, &stage)).await?;
        let merge = ddl::upsert_merge(t, &stage, identity);
        (stage, merge)
    } else {
        (ddl::qualified(t), None)
    };
    let columns: Vec<String> = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none())
        .map(|c| quote_mssql(&c.target_name))
        .collect();
    let ctx = BulkCtx {
        migration,
        task: &task.name,
        table: &load_table,
        columns: &columns,
        keep_identity: !upsert && identity && t.columns.iter().any(|c| c.identity),
        committed_rows,
        committed_digest: resume.committed_digest,
        fail_after_chunks: engine.copy.fail_after_chunks,
        merge_sql: merge_sql.as_deref(),
        committed: Some(state.committed()),
    };
    // Rows are encoded for the bulk load by the reader, away from the connection.
    let encoder = row_encoder(&mut ms, &ctx).await?;
    let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
    let reader = read_task(
        &pg.client,
        t,
        task,
        after.as_deref(),
        engine.copy.chunk,
        engine.options.checksum_by_task(),
        &encoder,
        tx,
    );
    let writer = async {
        let (mut ms, mut rx) = (ms, rx);
        let written = write_chunks(&mut ms, &mut rx, &ctx, &encoder).await;
        // Closing the receiver stops a reader that is still producing; a failed chunk's
        // transaction is rolled back by closing its connection, which only a success keeps.
        drop(rx);
        written.map(|stats| (stats, ms))
    };
    // The PostgreSQL connection's I/O, the reader and the writer are polled by this one tokio
    // task, not spawned apart: the reader does nearly all the CPU work (decoding COPY rows,
    // encoding bulk rows) while the other two mostly wait on sockets, so separate tasks bought
    // no parallelism but cross-thread wake-ups, 15% of the worker's CPU on a 2-core machine
    // shared with both databases (bench/RESULTS.md, third set of 2026-11-25). Tasks still run
    // side by side on the runtime's threads.
    let (read, written) = with_kept_connection_io(async { tokio::join!(reader, writer) }, &mut pg.io).await;
    // A connection that stalled explains the error its client saw (a closed connection).
    if (read.is_err() || written.is_err())
        && let Some(s) = stalled(&t.source.qualified(), [&pg.watch, &ms_watch])
    {
        return Err(PgToMssqlError::Stalled(s));
    }
    // A reader error explains a writer that saw the channel close; report it first.
    read?;
    let (stats, mut ms) = written?;
    if upsert {
        // The staging table is per task; it is empty after the last chunk. A connection that
        // cannot drop it is not kept.
        if ms_batch(
            &mut ms,
            "staging table",
            &format!("DROP TABLE IF EXISTS {load_table}"),
        )
        .await
        .is_err()
        {
            pools.give_back_pg(pg).await;
            return Ok(resume.finish(stats));
        }
    }
    pools.give_back_mssql(TdsConn {
        client: ms,
        watch: ms_watch,
    });
    pools.give_back_pg(pg).await;
    Ok(resume.finish(stats))
}

/// Counts (and checksums) one part of a table (a copy task's key range, or the whole table) on
/// both sides. `stored` is the source digest the copy computed as it read the rows (see
/// [`crate::pg::read::read_task`]); without it PostgreSQL's rows are read again and hashed
/// ([`crate::verify::pg_digest`], over [`verify_columns`]). SQL Server's rows are read and hashed
/// here, with the type OIDs of PostgreSQL's expressions so that both sides hash the same bytes.
/// The two sides run at once.
pub async fn verify_part(
    pg: &Client,
    ms: &mut TdsClient,
    t: &PgToMssqlTablePlan,
    task: Option<&TaskPlan>,
    mode: VerifyMode,
    upsert: bool,
    stored: Option<Digest>,
) -> Result<(Digest, Digest), PgToMssqlError> {
    let table = t.source.qualified();
    let verr = |message: String| PgToMssqlError::Verify {
        table: table.clone(),
        message,
    };
    if mode == VerifyMode::Count {
        let s: i64 = pg
            .query_one(&format!("SELECT count(*) FROM {}", pg_table(&t.source)), &[])
            .await
            .map_err(|e| verr(e.to_string()))?
            .get(0);
        let tgt = scalar_i64(ms, &format!("SELECT COUNT_BIG(*) FROM {}", ddl::qualified(t)))
            .await?
            .unwrap_or(0);
        let rows = |rows| Digest {
            rows,
            ..Digest::default()
        };
        return Ok((rows(s), rows(tgt)));
    }
    pg.batch_execute(SESSION_SETTINGS)
        .await
        .map_err(|e| verr(e.to_string()))?;
    let VerifyColumns { exprs, oids } = verify_columns(pg, t).await.map_err(|e| verr(e.to_string()))?;
    let from = pg_table(&t.source);
    let key = t.int_key();
    let pg_filter =
        crate::verify::range_condition(key.map(|k| quote_pg(&t.columns[k].source.name)).as_deref(), task);
    let ms_filter = crate::verify::range_condition(
        key.map(|k| quote_mssql(&t.columns[k].target_name)).as_deref(),
        task,
    );
    let source_hasher = RowHasher::new(oids.clone());
    let source = async {
        match stored {
            Some(d) => Ok(d),
            None => crate::verify::pg_digest(pg, &exprs, source_hasher, &from, pg_filter.as_deref(), upsert)
                .await
                .map_err(|e| verr(e.to_string())),
        }
    };
    let target = mssql_digest(ms, t, ms_filter.as_deref(), oids, upsert);
    let (source, target) = tokio::join!(source, target);
    Ok((source?, target?))
}

/// SQL Server rows encoded in the canonical PostgreSQL binary form straight from the raw TDS row
/// stream and hashed (the forward copy's encoder, [`hash_rows`]).
async fn mssql_digest(
    ms: &mut TdsClient,
    t: &PgToMssqlTablePlan,
    filter: Option<&str>,
    oids: Vec<u32>,
    keep: bool,
) -> Result<Digest, PgToMssqlError> {
    let table = t.source.qualified();
    let cols = t
        .columns
        .iter()
        .map(|c| c.ms_select.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let sql = format!("SELECT {cols} FROM {}{filter}", ddl::qualified(t));
    let encoder = RowEncoder::new(t.columns.iter().map(|c| c.canonical).collect());
    let mut hasher = RowHasher::new(oids);
    let mut digest = Digest::keeping_rows(keep);
    hash_rows(ms, &table, sql, &encoder, &mut hasher, |h| digest.add(h))
        .await
        .map_err(|e| PgToMssqlError::Verify {
            table: table.clone(),
            message: crate::error_text::error_text(&e),
        })?;
    Ok(digest)
}

/// The schema holding checkpoints (and upsert staging tables) in SQL Server.
pub fn state_schema() -> &'static str {
    SCHEMA
}

impl Engine for PgToMssqlEngine {
    type Plan = PgToMssqlPlan;
    type Error = PgToMssqlError;
    type TaskError = PgToMssqlError;
    const DIRECTION: &'static str = "postgres-to-mssql";

    fn options(&self) -> &Options {
        &self.options
    }

    fn is_permanent(e: &PgToMssqlError) -> bool {
        e.is_permanent()
    }

    fn requested_packet_size(&self) -> u32 {
        self.target.packet_size.min(REQUESTED_PACKET_SIZE)
    }

    async fn dry_run(&self) -> Result<DryRun<PgToMssqlPlan>, PgToMssqlError> {
        PgToMssqlEngine::dry_run(self).await
    }

    async fn prepare(&self) -> Result<Prepared<PgToMssqlPlan>, PgToMssqlError> {
        PgToMssqlEngine::prepare(self).await
    }

    async fn stored_plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        PgToMssqlEngine::stored_plan(self).await
    }

    async fn finalize(&self, plan: &PgToMssqlPlan, keys: &KeysBuilt) -> Result<Vec<String>, PgToMssqlError> {
        PgToMssqlEngine::finalize_reporting(self, plan, keys).await
    }

    async fn mark_succeeded(&self, plan: &PgToMssqlPlan) -> Result<(), PgToMssqlError> {
        PgToMssqlEngine::mark_succeeded(self, plan).await
    }

    fn task_reports(e: &PgToMssqlError) -> Vec<TaskReport> {
        e.task_reports()
    }

    async fn copy_task(
        &self,
        plan: &PgToMssqlPlan,
        task: &TaskPlan,
        pools: &Pools,
    ) -> Result<TaskReport, PgToMssqlError> {
        copy_task(self, &plan.tables[task.table], task, pools).await
    }

    /// A checksum without upsert checks each task's key range on its own (in parallel), against
    /// the source digest its copy stored when every task of the table has one (PostgreSQL's rows
    /// are then not read again); otherwise the range's rows are read from PostgreSQL and hashed.
    async fn verify_parts(&self, plan: &PgToMssqlPlan) -> Result<Vec<VerifyPart>, PgToMssqlError> {
        if !self.options.checksum_by_task() {
            return Ok(VerifyPart::whole_tables(plan.tables.len()));
        }
        let (mut ms, _) = self.connect_target().await?;
        let stored = mscp::load_digests(&mut ms, &self.options.migration).await?;
        let parts = (0..plan.tables.len())
            .flat_map(|i| {
                VerifyPart::stored(i, &plan.tasks, &stored)
                    .unwrap_or_else(|| VerifyPart::per_task(i, &plan.tasks))
            })
            .collect();
        Ok(parts)
    }

    async fn verify_part(
        &self,
        plan: &PgToMssqlPlan,
        part: VerifyPart,
    ) -> Result<PartDigests, PgToMssqlError> {
        let t = &plan.tables[part.table];
        let (mut ms, _) = self.connect_target().await?;
        let pg = self.source.connect().await?;
        let upsert = self.options.mode == Mode::Upsert;
        let (source, target) = verify_part(
            &pg,
            &mut ms,
            t,
            part.task.as_ref(),
            self.options.verify,
            upsert,
            part.stored,
        )
        .await?;
        Ok(PartDigests {
            table: t.source.qualified(),
            source,
            target,
        })
    }

    fn failed_report(e: &PgToMssqlError) -> Option<&TaskReport> {
        e.report()
    }

    fn task_error(task: String, source: PgToMssqlError) -> PgToMssqlError {
        PgToMssqlError::Task {
            task,
            source: Box::new(source),
        }
    }

    fn join_error(e: tokio::task::JoinError) -> PgToMssqlError {
        PgToMssqlError::Join(e.to_string())
    }

    fn no_such_task(name: &str) -> PgToMssqlError {
        PgToMssqlError::NoSuchTask(name.into())
    }

    fn copy_failed(
        total: usize,
        mut errors: Vec<PgToMssqlError>,
        reports: Vec<TaskReport>,
    ) -> PgToMssqlError {
        match errors.len() {
            // One failure reads best as itself when it is the only task.
            1 if total == 1 => errors.remove(0),
            failed => PgToMssqlError::Tasks {
                failed,
                total,
                first: Box::new(errors.remove(0)),
                reports,
            },
        }
    }
}
