//! Resume state of the PostgreSQL -> SQL Server direction, kept in the SQL Server target (schema
//! `_mssqlpg`) and written in the same transaction as each chunk's bulk load, exactly like the
//! PostgreSQL-side store of the other direction. The record types are shared
//! ([`crate::copy::checkpoint::Checkpoint`], [`crate::copy::checkpoint::KeyValue`]).

use crate::copy::checkpoint::{Checkpoint, RunRecord, SCHEMA, StoredDigests};
use crate::fence::{self, Fence, FenceError};
use crate::mssql::connect::TdsClient;

#[derive(Debug, thiserror::Error)]
pub enum MsCheckpointError {
    #[error("checkpoint table in SQL Server ({what}): {source}")]
    Db {
        what: &'static str,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("checkpoint of task {task}: stored key is not valid: {source}")]
    BadKey {
        task: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Fence(#[from] FenceError),
}

impl MsCheckpointError {
    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        matches!(self, MsCheckpointError::Fence(e) if e.taken_over().is_some())
    }
}

fn db(what: &'static str) -> impl Fn(tiberius::error::Error) -> MsCheckpointError {
    move |source| MsCheckpointError::Db { what, source }
}

/// "There is already an object named ..." (a concurrent worker created it first).
fn already_exists(e: &tiberius::error::Error) -> bool {
    matches!(e, tiberius::error::Error::Server(t) if t.code() == 2714)
}

pub fn checkpoints_table() -> String {
    format!("[{SCHEMA}].[checkpoints]")
}

pub fn runs_table() -> String {
    format!("[{SCHEMA}].[runs]")
}

pub fn recreate_table() -> String {
    format!("[{SCHEMA}].[recreate]")
}

/// The table of the copy tasks' fences ([`crate::fence`]).
pub fn fences_table() -> String {
    format!("[{SCHEMA}].[fences]")
}

/// Whether the state tables exist: reading a run's state must not create them (a dry run writes
/// nothing).
pub async fn tables_exist(c: &mut TdsClient) -> Result<bool, MsCheckpointError> {
    Ok(!scalar_is_null(
        c,
        &format!("SELECT OBJECT_ID(N'{}')", runs_table()),
        "table lookup",
    )
    .await?)
}

async fn scalar_is_null(c: &mut TdsClient, sql: &str, what: &'static str) -> Result<bool, MsCheckpointError> {
    let row = c
        .simple_query(sql)
        .await
        .map_err(db(what))?
        .into_row()
        .await
        .map_err(db(what))?;
    Ok(row.is_none_or(|r| r.get::<i32, _>(0).is_none()))
}

/// Creates the schema and tables when missing; safe when several workers race.
pub async fn ensure_tables(c: &mut TdsClient) -> Result<(), MsCheckpointError> {
    // CREATE SCHEMA must be alone in its batch.
    create_missing(
        c,
        (&format!("SELECT SCHEMA_ID(N'{SCHEMA}')"), "schema lookup"),
        (format!("CREATE SCHEMA [{SCHEMA}]"), "create schema"),
        already_exists,
    )
    .await?;
    let tables = [
        (
            checkpoints_table(),
            format!(
                "CREATE TABLE {} (migration nvarchar(400) NOT NULL, task nvarchar(400) NOT NULL, \
                 last_key nvarchar(max) NULL, [rows] bigint NOT NULL, done bit NOT NULL, \
                 digest bigint NULL, updated_at datetime2(3) NOT NULL DEFAULT SYSUTCDATETIME(), \
                 CONSTRAINT [PK__mssqlpg_checkpoints] PRIMARY KEY (migration, task))",
                checkpoints_table()
            ),
        ),
        (
            runs_table(),
            format!(
                "CREATE TABLE {} (migration nvarchar(400) NOT NULL, fingerprint nvarchar(64) NOT NULL, \
                 state nvarchar(32) NOT NULL, tasks nvarchar(max) NULL, \
                 updated_at datetime2(3) NOT NULL DEFAULT SYSUTCDATETIME(), \
                 CONSTRAINT [PK__mssqlpg_runs] PRIMARY KEY (migration))",
                runs_table()
            ),
        ),
        (
            recreate_table(),
            format!(
                "CREATE TABLE {} (migration nvarchar(400) NOT NULL, seq int NOT NULL, \
                 statement nvarchar(max) NOT NULL, \
                 CONSTRAINT [PK__mssqlpg_recreate] PRIMARY KEY (migration, seq))",
                recreate_table()
            ),
        ),
        (
            fences_table(),
            fence::mssql_table(&fences_table(), "PK__mssqlpg_fences"),
        ),
    ];
    for (name, create) in tables {
        create_missing(
            c,
            (&format!("SELECT OBJECT_ID(N'{name}')"), "table lookup"),
            (create, "create table"),
            already_exists,
        )
        .await?;
    }
    add_digest_column(c).await?;
    add_column(c, &runs_table(), "run_id", "nvarchar(64) NULL").await?;
    add_column(c, &runs_table(), "generation", "bigint NOT NULL DEFAULT 0").await
}

/// Runs `ddl` when `lookup` (a query of one scalar) finds nothing; `raced` tells the error of a
/// concurrent worker that got there first, which is no error.
async fn create_missing(
    c: &mut TdsClient,
    (lookup, lookup_what): (&str, &'static str),
    (ddl, what): (String, &'static str),
    raced: fn(&tiberius::error::Error) -> bool,
) -> Result<(), MsCheckpointError> {
    if !scalar_is_null(c, lookup, lookup_what).await? {
        return Ok(());
    }
    match c.simple_query(ddl).await {
        Ok(s) => {
            s.into_results().await.map_err(db(what))?;
        }
        Err(e) if raced(&e) => {}
        Err(e) => return Err(db(what)(e)),
    }
    Ok(())
}

/// "Column names in each table must be unique" (a concurrent worker added it first).
fn column_exists(e: &tiberius::error::Error) -> bool {
    matches!(e, tiberius::error::Error::Server(t) if t.code() == 2705)
}

/// A checkpoints table made by a worker from before the verify digest gets its column (NULL for
/// the checkpoints already there: their tasks are verified by reading the source again).
async fn add_digest_column(c: &mut TdsClient) -> Result<(), MsCheckpointError> {
    add_column(c, &checkpoints_table(), "digest", "bigint NULL").await
}

/// Adds column `column` of type `definition` to a state table made by an older worker.
async fn add_column(
    c: &mut TdsClient,
    table: &str,
    column: &str,
    definition: &str,
) -> Result<(), MsCheckpointError> {
    create_missing(
        c,
        (
            &format!(
                "SELECT MAX(column_id) FROM sys.columns WHERE object_id = OBJECT_ID(N'{table}') AND name = N'{column}'"
            ),
            "column lookup",
        ),
        (format!("ALTER TABLE {table} ADD {column} {definition}"), "add column"),
        column_exists,
    )
    .await
}

pub async fn load(
    c: &mut TdsClient,
    migration: &str,
    task: &str,
) -> Result<Option<Checkpoint>, MsCheckpointError> {
    let row = c
        .query(
            format!(
                "SELECT last_key, [rows], done, digest FROM {} WHERE migration = @P1 AND task = @P2",
                checkpoints_table()
            ),
            &[&migration, &task],
        )
        .await
        .map_err(db("load"))?
        .into_row()
        .await
        .map_err(db("load"))?;
    let Some(row) = row else { return Ok(None) };
    let key: Option<&str> = row.get(0);
    let last_key = key
        .map(serde_json::from_str)
        .transpose()
        .map_err(|source| MsCheckpointError::BadKey {
            task: task.to_string(),
            source,
        })?;
    Ok(Some(Checkpoint {
        last_key,
        rows: row.get::<i64, _>(1).unwrap_or(0),
        done: row.get::<bool, _>(2).unwrap_or(false),
        digest: row.get::<i64, _>(3).map(|d| d as u64),
    }))
}

/// Every task's (rows, done, digest) of a migration, for verify; none before the state tables
/// exist.
pub async fn load_digests(c: &mut TdsClient, migration: &str) -> Result<StoredDigests, MsCheckpointError> {
    if !tables_exist(c).await? {
        return Ok(StoredDigests::new());
    }
    let rows = c
        .query(
            format!(
                "SELECT task, [rows], done, digest FROM {} WHERE migration = @P1",
                checkpoints_table()
            ),
            &[&migration],
        )
        .await
        .map_err(db("load digests"))?
        .into_first_result()
        .await
        .map_err(db("load digests"))?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let task = r.get::<&str, _>(0)?.to_string();
            let state = (
                r.get::<i64, _>(1).unwrap_or(0),
                r.get::<bool, _>(2).unwrap_or(false),
                r.get::<i64, _>(3).map(|d| d as u64),
            );
            Some((task, state))
        })
        .collect())
}

/// Replaces a task's checkpoint; call it inside the chunk's transaction.
pub async fn save(
    c: &mut TdsClient,
    migration: &str,
    task: &str,
    cp: &Checkpoint,
) -> Result<(), MsCheckpointError> {
    let key = cp
        .last_key
        .as_ref()
        .map(|k| serde_json::to_string(k).unwrap_or_default());
    c.execute(
        format!(
            "DELETE FROM {t} WHERE migration = @P1 AND task = @P2; \
             INSERT INTO {t} (migration, task, last_key, [rows], done, digest) \
             VALUES (@P1, @P2, @P3, @P4, @P5, @P6)",
            t = checkpoints_table()
        ),
        &[
            &migration,
            &task,
            &key,
            &cp.rows,
            &cp.done,
            &cp.digest.map(|d| d as i64),
        ],
    )
    .await
    .map_err(db("save"))?;
    Ok(())
}

pub async fn reset(c: &mut TdsClient, migration: &str) -> Result<(), MsCheckpointError> {
    c.execute(
        format!("DELETE FROM {} WHERE migration = @P1", checkpoints_table()),
        &[&migration],
    )
    .await
    .map_err(db("reset"))?;
    Ok(())
}

/// A migration's recorded run and its task list (JSON).
pub async fn run_state(
    c: &mut TdsClient,
    migration: &str,
) -> Result<Option<(RunRecord, Option<String>)>, MsCheckpointError> {
    let row = c
        .query(
            format!(
                "SELECT fingerprint, state, tasks, run_id, generation FROM {} WHERE migration = @P1",
                runs_table()
            ),
            &[&migration],
        )
        .await
        .map_err(db("run state"))?
        .into_row()
        .await
        .map_err(db("run state"))?;
    Ok(row.map(|r| {
        let text = |i: usize| r.get::<&str, _>(i).map(str::to_string);
        let run = RunRecord {
            fingerprint: text(0).unwrap_or_default(),
            state: text(1).unwrap_or_default(),
            run_id: text(3),
            generation: r.get::<i64, _>(4).unwrap_or(0),
        };
        (run, text(2))
    }))
}

/// Records the state of the current run (started by [`begin_run`]), and its tasks when given.
pub async fn set_run_state(
    c: &mut TdsClient,
    migration: &str,
    fingerprint: &str,
    state: &str,
    tasks: Option<&str>,
) -> Result<(), MsCheckpointError> {
    match tasks {
        Some(tasks) => c
            .execute(
                format!(
                    "UPDATE {} SET fingerprint = @P2, state = @P3, tasks = @P4, updated_at = SYSUTCDATETIME() \
                     WHERE migration = @P1",
                    runs_table()
                ),
                &[&migration, &fingerprint, &state, &tasks],
            )
            .await
            .map_err(db("run state"))?,
        None => c
            .execute(
                format!(
                    "UPDATE {} SET fingerprint = @P2, state = @P3, updated_at = SYSUTCDATETIME() WHERE migration = @P1",
                    runs_table()
                ),
                &[&migration, &fingerprint, &state],
            )
            .await
            .map_err(db("run state"))?,
    };
    Ok(())
}

/// Starts a new run of `migration` for the Migration object `run_id` before anything of it is
/// written, raising its generation and every fence of the migration in one transaction (see
/// [`crate::copy::checkpoint::begin_run`]). Returns the new generation.
pub async fn begin_run(
    c: &mut TdsClient,
    migration: &str,
    run_id: Option<&str>,
) -> Result<i64, MsCheckpointError> {
    let runs = runs_table();
    let result = async {
        c.simple_query("BEGIN TRANSACTION")
            .await
            .map_err(db("begin run"))?
            .into_results()
            .await
            .map_err(db("begin run"))?;
        c.execute(
            format!(
                "INSERT INTO {runs} (migration, fingerprint, state, generation) SELECT @P1, N'', N'preparing', 0 \
                 WHERE NOT EXISTS (SELECT 1 FROM {runs} WHERE migration = @P1)"
            ),
            &[&migration],
        )
        .await
        .map_err(db("begin run"))?;
        let generation = c
            .query(
                format!(
                    "UPDATE {runs} SET fingerprint = N'', state = N'preparing', tasks = NULL, run_id = @P2, \
                     generation = generation + 1, updated_at = SYSUTCDATETIME() OUTPUT inserted.generation \
                     WHERE migration = @P1"
                ),
                &[&migration, &run_id],
            )
            .await
            .map_err(db("begin run"))?
            .into_row()
            .await
            .map_err(db("begin run"))?
            .and_then(|r| r.get::<i64, _>(0))
            .unwrap_or(0);
        fence::bump_mssql(c, &fences_table(), migration).await?;
        c.simple_query("COMMIT TRANSACTION")
            .await
            .map_err(db("begin run"))?
            .into_results()
            .await
            .map_err(db("begin run"))?;
        Ok::<_, MsCheckpointError>(generation)
    }
    .await;
    if result.is_err() {
        // Closing the session, as the caller does after an error, rolls back as well.
        if let Ok(s) = c.simple_query("ROLLBACK TRANSACTION").await {
            let _ = s.into_results().await;
        }
    }
    result
}

/// Claims task `task` of `migration` for run `run` (see [`crate::copy::checkpoint::claim`]).
pub async fn claim(
    c: &mut TdsClient,
    migration: &str,
    task: &str,
    run: i64,
) -> Result<Fence, MsCheckpointError> {
    let fence = fence::claim_mssql(c, &fences_table(), migration, task).await?;
    let current = run_state(c, migration).await?.map(|(r, _)| r.generation);
    if current != Some(run) {
        return Err(fence::run_replaced(&fence).into());
    }
    Ok(fence)
}

/// Remembers statements that recreate foreign keys of tables outside the migration which the
/// load had to drop (`dropDependents`); finalize runs them.
pub async fn save_recreate(
    c: &mut TdsClient,
    migration: &str,
    statements: &[String],
) -> Result<(), MsCheckpointError> {
    c.execute(
        format!("DELETE FROM {} WHERE migration = @P1", recreate_table()),
        &[&migration],
    )
    .await
    .map_err(db("recreate"))?;
    for (i, sql) in statements.iter().enumerate() {
        let seq = i32::try_from(i).unwrap_or(i32::MAX);
        c.execute(
            format!(
                "INSERT INTO {} (migration, seq, statement) VALUES (@P1, @P2, @P3)",
                recreate_table()
            ),
            &[&migration, &seq, &sql.as_str()],
        )
        .await
        .map_err(db("recreate"))?;
    }
    Ok(())
}

/// The statements [`save_recreate`] stored, in order.
pub async fn recreate_statements(
    c: &mut TdsClient,
    migration: &str,
) -> Result<Vec<String>, MsCheckpointError> {
    let rows = c
        .query(
            format!(
                "SELECT statement FROM {} WHERE migration = @P1 ORDER BY seq",
                recreate_table()
            ),
            &[&migration],
        )
        .await
        .map_err(db("recreate"))?
        .into_first_result()
        .await
        .map_err(db("recreate"))?;
    Ok(rows
        .iter()
        .filter_map(|r| r.get::<&str, _>(0).map(str::to_string))
        .collect())
}

/// Forgets them once finalize has run them.
pub async fn clear_recreate(c: &mut TdsClient, migration: &str) -> Result<(), MsCheckpointError> {
    c.execute(
        format!("DELETE FROM {} WHERE migration = @P1", recreate_table()),
        &[&migration],
    )
    .await
    .map_err(db("recreate"))?;
    Ok(())
}
