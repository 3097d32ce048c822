//! Resume state kept in the target database, written in the same transaction as each chunk's COPY:
//! after a crash the last committed key and the committed rows agree by construction.

use crate::fence::{self, Fence, FenceError};
use serde::{Deserialize, Serialize};
use tokio_postgres::{Client, GenericClient};

pub const SCHEMA: &str = "_mssqlpg";

/// One key column value of the last committed row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", content = "v")]
pub enum KeyValue {
    Int(i64),
    Str(String),
    /// Hyphenated.
    Uuid(String),
    /// `YYYY-MM-DD`
    Date(String),
    /// `YYYY-MM-DDTHH:MM:SS.fffffffff`
    DateTime(String),
    /// The unscaled integer as a string, and the scale.
    Decimal(String, u8),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkpoint {
    pub last_key: Option<Vec<KeyValue>>,
    pub rows: i64,
    pub done: bool,
    /// The verify checksum's sum of row hashes over the task's committed rows
    /// ([`crate::verify::RowHasher`]), when the copy computed it for every one of them.
    pub digest: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint table: {0}")]
    Db(#[from] tokio_postgres::Error),
    #[error("checkpoint of task {task}: stored key is not valid: {source}")]
    BadKey {
        task: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Fence(#[from] FenceError),
}

impl CheckpointError {
    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        matches!(self, CheckpointError::Fence(e) if e.taken_over().is_some())
    }
}

/// The table of the copy tasks' fences ([`crate::fence`]).
pub fn fences_table() -> String {
    format!("\"{SCHEMA}\".\"fences\"")
}

/// Key of the transaction-level advisory lock serializing [`ensure_tables`] ("mssqlpg" in ASCII).
const ENSURE_LOCK: i64 = 0x006d_7373_716c_7067;

/// Creates the checkpoint schema and tables when missing. `IF NOT EXISTS` alone is not safe when
/// copy tasks start in parallel: two sessions both see the schema missing and the second fails on
/// pg_namespace's unique index; the advisory lock makes them take turns.
pub async fn ensure_tables(client: &Client) -> Result<(), CheckpointError> {
    let result = client
        .batch_execute(&format!(
            "BEGIN;
             SELECT pg_advisory_xact_lock({ENSURE_LOCK});
             CREATE SCHEMA IF NOT EXISTS \"{SCHEMA}\";
             CREATE TABLE IF NOT EXISTS \"{SCHEMA}\".\"checkpoints\" (
                migration text NOT NULL,
                task text NOT NULL,
                last_key text,
                rows bigint NOT NULL DEFAULT 0,
                done boolean NOT NULL DEFAULT false,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (migration, task));
             CREATE TABLE IF NOT EXISTS \"{SCHEMA}\".\"runs\" (
                migration text PRIMARY KEY,
                fingerprint text NOT NULL,
                state text NOT NULL,
                tasks text,
                started_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now());
             ALTER TABLE \"{SCHEMA}\".\"runs\" ADD COLUMN IF NOT EXISTS tasks text;
             ALTER TABLE \"{SCHEMA}\".\"runs\" ADD COLUMN IF NOT EXISTS run_id text;
             ALTER TABLE \"{SCHEMA}\".\"runs\" ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 0;
             {fences};
             ALTER TABLE \"{SCHEMA}\".\"checkpoints\" ADD COLUMN IF NOT EXISTS digest bigint;
             CREATE TABLE IF NOT EXISTS \"{SCHEMA}\".\"recreate\" (
                migration text NOT NULL,
                seq int NOT NULL,
                statement text NOT NULL,
                PRIMARY KEY (migration, seq));
             -- Emptied by every crash recovery, as the target's UNLOGGED tables are (preflight/unlogged_loss.rs);
             -- a mark left from an earlier run only says no crash happened since, which stays true.
             CREATE UNLOGGED TABLE IF NOT EXISTS \"{SCHEMA}\".\"unlogged_marks\" (
                migration text NOT NULL,
                task text NOT NULL,
                PRIMARY KEY (migration, task));
             COMMIT;",
            fences = fence::pg_table(&fences_table())
        ))
        .await;
    if let Err(e) = result {
        // A failed statement leaves the transaction aborted on this connection; end it so the
        // caller's next statement does not fail with "current transaction is aborted".
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e.into());
    }
    Ok(())
}

pub async fn load(
    client: &Client,
    migration: &str,
    task: &str,
) -> Result<Option<Checkpoint>, CheckpointError> {
    let row = client
        .query_opt(
            &format!("SELECT last_key, rows, done, digest FROM \"{SCHEMA}\".\"checkpoints\" WHERE migration = $1 AND task = $2"),
            &[&migration, &task],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let key: Option<String> = row.get(0);
    let last_key = key
        .map(|k| serde_json::from_str(&k))
        .transpose()
        .map_err(|source| CheckpointError::BadKey {
            task: task.to_string(),
            source,
        })?;
    Ok(Some(Checkpoint {
        last_key,
        rows: row.get(1),
        done: row.get(2),
        digest: row.get::<_, Option<i64>>(3).map(|d| d as u64),
    }))
}

/// Each task's checkpoint as verify reads it, by task name: (rows, done, source digest).
pub type StoredDigests = std::collections::HashMap<String, (i64, bool, Option<u64>)>;

/// Every task's (rows, done, digest) of a migration, for verify; none before the state tables
/// exist.
pub async fn load_digests(client: &Client, migration: &str) -> Result<StoredDigests, CheckpointError> {
    if !tables_exist(client).await? {
        return Ok(Default::default());
    }
    Ok(client
        .query(
            &format!(
                "SELECT task, rows, done, digest FROM \"{SCHEMA}\".\"checkpoints\" WHERE migration = $1"
            ),
            &[&migration],
        )
        .await?
        .iter()
        .map(|r| {
            let digest: Option<i64> = r.get(3);
            (r.get(0), (r.get(1), r.get(2), digest.map(|d| d as u64)))
        })
        .collect())
}

/// Upserts a task's checkpoint; call it inside the chunk's transaction.
pub async fn save<C: GenericClient>(
    client: &C,
    migration: &str,
    task: &str,
    cp: &Checkpoint,
) -> Result<(), CheckpointError> {
    let key = cp
        .last_key
        .as_ref()
        .map(|k| serde_json::to_string(k).unwrap_or_default());
    client
        .execute(
            &format!(
                "INSERT INTO \"{SCHEMA}\".\"checkpoints\" (migration, task, last_key, rows, done, digest, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, now())
                 ON CONFLICT (migration, task) DO UPDATE
                 SET last_key = EXCLUDED.last_key, rows = EXCLUDED.rows, done = EXCLUDED.done,
                     digest = EXCLUDED.digest, updated_at = now()"
            ),
            &[&migration, &task, &key, &cp.rows, &cp.done, &cp.digest.map(|d| d as i64)],
        )
        .await?;
    Ok(())
}

/// Forgets every checkpoint of a migration (a fresh start).
pub async fn reset(client: &Client, migration: &str) -> Result<(), CheckpointError> {
    client
        .execute(
            &format!("DELETE FROM \"{SCHEMA}\".\"checkpoints\" WHERE migration = $1"),
            &[&migration],
        )
        .await?;
    Ok(())
}

/// Whether the checkpoint tables exist: reading a run's state must not create them (a dry run
/// writes nothing).
pub async fn tables_exist(client: &Client) -> Result<bool, CheckpointError> {
    Ok(client
        .query_one(
            &format!("SELECT to_regclass('\"{SCHEMA}\".\"runs\"') IS NOT NULL"),
            &[],
        )
        .await?
        .get(0))
}

/// Remembers statements that recreate objects outside the migration (foreign keys of other
/// tables) which the load had to drop; finalize runs them.
pub async fn save_recreate(
    client: &Client,
    migration: &str,
    statements: &[String],
) -> Result<(), CheckpointError> {
    for (i, sql) in statements.iter().enumerate() {
        let seq = i32::try_from(i).unwrap_or(i32::MAX);
        client
            .execute(
                &format!(
                    "INSERT INTO \"{SCHEMA}\".\"recreate\" (migration, seq, statement) VALUES ($1, $2, $3) \
                     ON CONFLICT (migration, seq) DO UPDATE SET statement = EXCLUDED.statement"
                ),
                &[&migration, &seq, sql],
            )
            .await?;
    }
    Ok(())
}

/// The statements [`save_recreate`] stored, in order.
pub async fn recreate_statements(client: &Client, migration: &str) -> Result<Vec<String>, CheckpointError> {
    Ok(client
        .query(
            &format!("SELECT statement FROM \"{SCHEMA}\".\"recreate\" WHERE migration = $1 ORDER BY seq"),
            &[&migration],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Forgets them once finalize has run them.
pub async fn clear_recreate(client: &Client, migration: &str) -> Result<(), CheckpointError> {
    client
        .execute(
            &format!("DELETE FROM \"{SCHEMA}\".\"recreate\" WHERE migration = $1"),
            &[&migration],
        )
        .await?;
    Ok(())
}

/// A migration's recorded run (`_mssqlpg.runs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The plan's fingerprint.
    pub fingerprint: String,
    pub state: String,
    /// The Migration object the run belongs to (its uid), when it came from the cluster.
    pub run_id: Option<String>,
    /// Which run of the migration this is: raised by every run that starts afresh.
    pub generation: i64,
}

impl RunRecord {
    /// Whether the run belongs to the Migration object `run_id`. A run recorded before runs were
    /// tied to one (no `run_id`) belongs to any.
    pub fn belongs_to(&self, run_id: Option<&str>) -> bool {
        self.run_id.is_none() || self.run_id.as_deref() == run_id
    }
}

/// Why a step of one Migration object cannot use the run `run` recorded for another of the same
/// name.
pub fn another_object(run: &RunRecord) -> String {
    format!(
        "the prepared run belongs to another Migration object of this name (uid {}): this step's Migration \
         was deleted, or applied again, since; the plan step of the current one prepares a run of its own",
        run.run_id.as_deref().unwrap_or_default()
    )
}

pub async fn run_state(client: &Client, migration: &str) -> Result<Option<RunRecord>, CheckpointError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT fingerprint, state, run_id, generation FROM \"{SCHEMA}\".\"runs\" WHERE migration = $1"
            ),
            &[&migration],
        )
        .await?;
    Ok(row.map(|r| RunRecord {
        fingerprint: r.get(0),
        state: r.get(1),
        run_id: r.get(2),
        generation: r.get(3),
    }))
}

/// Starts a new run of `migration` for the Migration object `run_id`, before anything of it is
/// written: its generation is raised and every fence of the migration with it, in one
/// transaction, so no worker of an earlier run commits again (see [`crate::fence`]). Returns the
/// new generation.
pub async fn begin_run(
    client: &Client,
    migration: &str,
    run_id: Option<&str>,
) -> Result<i64, CheckpointError> {
    let tx_result = async {
        client.batch_execute("BEGIN").await?;
        let generation: i64 = client
            .query_one(
                &format!(
                    "INSERT INTO \"{SCHEMA}\".\"runs\" AS r (migration, fingerprint, state, run_id, generation)
                     VALUES ($1, '', 'preparing', $2, 1)
                     ON CONFLICT (migration) DO UPDATE
                     SET fingerprint = '', state = 'preparing', tasks = NULL, run_id = EXCLUDED.run_id,
                         generation = r.generation + 1, started_at = now(), updated_at = now()
                     RETURNING generation"
                ),
                &[&migration, &run_id],
            )
            .await?
            .get(0);
        fence::bump_pg(client, &fences_table(), migration).await?;
        client.batch_execute("COMMIT").await?;
        Ok::<_, CheckpointError>(generation)
    }
    .await;
    if tx_result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    tx_result
}

/// Claims task `task` of `migration` for this process ([`crate::fence`]), for the run of
/// generation `run`: a claim made after a new run replaced that one fails with the fence's
/// taken-over error, so a worker of an earlier run never writes into a later one.
pub async fn claim(client: &Client, migration: &str, task: &str, run: i64) -> Result<Fence, CheckpointError> {
    let fence = fence::claim_pg(client, &fences_table(), migration, task).await?;
    // Read after the claim committed: a run begun before it is seen here, one begun after it
    // raised the claim's epoch (see [`begin_run`]).
    let current = run_state(client, migration).await?.map(|r| r.generation);
    if current != Some(run) {
        return Err(fence::run_replaced(&fence).into());
    }
    Ok(fence)
}

pub async fn set_run_state(
    client: &Client,
    migration: &str,
    fingerprint: &str,
    state: &str,
) -> Result<(), CheckpointError> {
    client
        .execute(
            &format!(
                "INSERT INTO \"{SCHEMA}\".\"runs\" (migration, fingerprint, state) VALUES ($1, $2, $3)
                 ON CONFLICT (migration) DO UPDATE
                 SET fingerprint = EXCLUDED.fingerprint, state = EXCLUDED.state, updated_at = now()"
            ),
            &[&migration, &fingerprint, &state],
        )
        .await?;
    Ok(())
}
