//! Resume state of the PostgreSQL -> SQL Server direction, kept in the SQL Server target (schema
//! `_mssqlpg`) and written in the same transaction as each chunk's bulk load, exactly like the
//! PostgreSQL-side store of the other direction. The record types are shared
//! ([`crate::checkpoint::Checkpoint`], [`crate::checkpoint::KeyValue`]).

use crate::checkpoint::{Checkpoint, SCHEMA, StoredDigests};
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
    add_digest_column(c).await
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
    let table = checkpoints_table();
    create_missing(
        c,
        (
            &format!(
                "SELECT MAX(column_id) FROM sys.columns WHERE object_id = OBJECT_ID(N'{table}') AND name = N'digest'"
            ),
            "column lookup",
        ),
        (format!("ALTER TABLE {table} ADD digest bigint NULL"), "add digest column"),
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

/// (fingerprint, state, tasks JSON) of a migration's recorded run.
pub async fn run_state(
    c: &mut TdsClient,
    migration: &str,
) -> Result<Option<(String, String, Option<String>)>, MsCheckpointError> {
    let row = c
        .query(
            format!(
                "SELECT fingerprint, state, tasks FROM {} WHERE migration = @P1",
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
        (
            r.get::<&str, _>(0).unwrap_or_default().to_string(),
            r.get::<&str, _>(1).unwrap_or_default().to_string(),
            r.get::<&str, _>(2).map(str::to_string),
        )
    }))
}

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
                    "DELETE FROM {t} WHERE migration = @P1; \
                     INSERT INTO {t} (migration, fingerprint, state, tasks) VALUES (@P1, @P2, @P3, @P4)",
                    t = runs_table()
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
