//! An online migration's state in a PostgreSQL target ([`super::state`]). The epoch is the copy's
//! one-writer token ([`crate::fence`], `_mssqlpg.fences`, under the name [`FENCE_NAME`]): each
//! claim raises it, every batch and every record checks it in its own transaction, and a new run
//! of the migration (which raises all its epochs) fences a streaming process out like a replaced
//! one. The state row keeps a copy for `status`.

use super::state::{OnlineRow, OnlineState};
use super::{Control, CutoverState, OnlineError, Position, Progress, Record};
use crate::copy::checkpoint::{self, SCHEMA};
use crate::fence::{self, Fence, FenceError};
use crate::schema::mssql_to_pg_types::quote_pg;
use tokio_postgres::{Client, GenericClient};

/// The stream's name among the migration's fences (a copy task's name always holds a dot).
pub const FENCE_NAME: &str = "online stream";

pub fn table() -> String {
    format!("{}.online", quote_pg(SCHEMA))
}

fn err(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> OnlineError {
    OnlineError::pg_target(what)
}

/// The fence of the stream with `epoch`.
pub fn fence_of(migration: &str, epoch: i64) -> Fence {
    Fence {
        scope: migration.to_string(),
        name: FENCE_NAME.to_string(),
        epoch,
    }
}

/// A fence that no longer holds, as the stream reports it.
fn fenced(e: FenceError, ours: i64) -> OnlineError {
    match e.taken_over() {
        Some(t) => OnlineError::Fenced {
            ours,
            found: match t.current {
                Some(fence::Claim::Newer(n)) => n,
                _ => -1,
            },
        },
        None => OnlineError::Fence(e),
    }
}

/// Records a batch's progress inside the batch's transaction `tx`, after checking the stream's
/// fence there (a newer claim waits for this transaction, or this one fails).
pub async fn advance(
    tx: &impl GenericClient,
    migration: &str,
    epoch: i64,
    p: &Progress,
) -> Result<(), OnlineError> {
    fence::check_pg(tx, &checkpoint::fences_table(), &fence_of(migration, epoch))
        .await
        .map_err(|e| fenced(e, epoch))?;
    let c = &p.counts;
    let (applied, total) = (p.applied as i64, c.total() as i64);
    let (ins, upd, del, tru) = (
        c.inserts as i64,
        c.updates as i64,
        c.deletes as i64,
        c.truncates as i64,
    );
    let source = p.source_position.map(|s| s as i64);
    tx.execute(
        &format!(
            "UPDATE {} SET applied = $2, changes = changes + $3, inserts = inserts + $4, \
             updates = updates + $5, deletes = deletes + $6, truncates = truncates + $7, \
             heartbeat_micros = COALESCE($8, heartbeat_micros), \
             source_position = COALESCE($9, source_position), updated_at = now() WHERE migration = $1",
            table()
        ),
        &[
            &migration,
            &applied,
            &total,
            &ins,
            &upd,
            &del,
            &tru,
            &p.heartbeat_micros,
            &source,
        ],
    )
    .await
    .map_err(err("record the applied position"))?;
    Ok(())
}

impl OnlineState for Client {
    async fn ensure(&mut self) -> Result<(), OnlineError> {
        checkpoint::ensure_tables(self).await?;
        self.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {0} (migration text PRIMARY KEY, epoch bigint NOT NULL, \
             phase text NOT NULL, slot text NOT NULL, anchor bigint NOT NULL, applied bigint NOT NULL, \
             source_position bigint, changes bigint NOT NULL, inserts bigint NOT NULL, \
             updates bigint NOT NULL, deletes bigint NOT NULL, truncates bigint NOT NULL, \
             heartbeat_micros bigint, cutover_state text, cutover_message text, \
             cutover_requested_at timestamptz, fence bigint, downtime_seconds double precision, \
             updated_at timestamptz NOT NULL, paused text, reinitialize text); \
             ALTER TABLE {0} ADD COLUMN IF NOT EXISTS paused text; \
             ALTER TABLE {0} ADD COLUMN IF NOT EXISTS reinitialize text",
            table()
        ))
        .await
        .map_err(err("create the state table"))
    }

    async fn load(&mut self, migration: &str) -> Result<Option<OnlineRow>, OnlineError> {
        let exists: bool = self
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table()])
            .await
            .map_err(err("state table lookup"))?
            .get(0);
        if !exists {
            return Ok(None);
        }
        let row = self
            .query_opt(
                &format!(
                    "SELECT epoch, phase, slot, anchor, applied, source_position, changes, inserts, updates, \
                     deletes, truncates, heartbeat_micros, cutover_state, cutover_message, fence, \
                     downtime_seconds, extract(epoch FROM now() - updated_at)::bigint, paused, reinitialize \
                     FROM {} WHERE migration = $1",
                    table()
                ),
                &[&migration],
            )
            .await
            .map_err(err("read the state"))?;
        Ok(row.map(|r| OnlineRow {
            migration: migration.to_string(),
            epoch: r.get(0),
            phase: r.get(1),
            slot: r.get(2),
            anchor: r.get::<_, i64>(3) as u64,
            applied: r.get::<_, i64>(4) as u64,
            source_position: r.get::<_, Option<i64>>(5).map(|p| p as u64),
            changes: r.get(6),
            inserts: r.get(7),
            updates: r.get(8),
            deletes: r.get(9),
            truncates: r.get(10),
            heartbeat_micros: r.get(11),
            cutover_state: r.get(12),
            cutover_message: r.get(13),
            fence: r.get::<_, Option<i64>>(14).map(|p| p as u64),
            downtime_seconds: r.get(15),
            seconds_since_update: r.get(16),
            paused: super::state::paused_list(r.get(17)),
            reinitialize: super::state::paused_list(r.get(18)),
        }))
    }

    async fn init(&mut self, migration: &str, slot: &str, anchor: Position) -> Result<(), OnlineError> {
        let anchor = anchor as i64;
        let tx = self.transaction().await.map_err(err("initialize the state"))?;
        tx.execute(
            &format!("DELETE FROM {} WHERE migration = $1", table()),
            &[&migration],
        )
        .await
        .map_err(err("initialize the state"))?;
        tx.execute(
            &format!(
                "INSERT INTO {} (migration, epoch, phase, slot, anchor, applied, changes, inserts, updates, \
                 deletes, truncates, updated_at) VALUES ($1, 0, 'Copying', $2, $3, $3, 0, 0, 0, 0, 0, now())",
                table()
            ),
            &[&migration, &slot, &anchor],
        )
        .await
        .map_err(err("initialize the state"))?;
        tx.commit().await.map_err(err("initialize the state"))
    }

    async fn claim(&mut self, migration: &str) -> Result<(i64, Position), OnlineError> {
        // Outside a transaction: the claim must be visible to the process it fences out.
        let f = fence::claim_pg(self, &checkpoint::fences_table(), migration, FENCE_NAME).await?;
        let row = self
            .query_opt(
                &format!(
                    "UPDATE {} SET epoch = $2, updated_at = now() WHERE migration = $1 RETURNING applied",
                    table()
                ),
                &[&migration, &f.epoch],
            )
            .await
            .map_err(err("claim the stream"))?;
        let applied = row.map(|r| r.get::<_, i64>(0) as u64).ok_or_else(|| {
            OnlineError::Setup(format!(
                "migration {migration}: no online state in the target (the stream was never anchored)"
            ))
        })?;
        Ok((f.epoch, applied))
    }

    async fn control(&mut self, migration: &str, epoch: i64) -> Result<Control, OnlineError> {
        let row = self
            .query_opt(
                &format!(
                    "SELECT f.epoch, o.cutover_state, o.reinitialize FROM {} o LEFT JOIN {} f \
                     ON f.migration = o.migration AND f.name = $2 WHERE o.migration = $1",
                    table(),
                    checkpoint::fences_table()
                ),
                &[&migration, &FENCE_NAME],
            )
            .await
            .map_err(err("read the state"))?;
        let Some(r) = row else {
            return Err(OnlineError::Fenced {
                ours: epoch,
                found: -1,
            });
        };
        let found: i64 = r.get::<_, Option<i64>>(0).unwrap_or(-1);
        if found != epoch {
            return Err(OnlineError::Fenced { ours: epoch, found });
        }
        let state: Option<String> = r.get(1);
        Ok(Control {
            cutover_requested: state.as_deref() == Some(CutoverState::Requested.as_str()),
            reinitialize: super::state::paused_list(r.get(2)),
        })
    }

    async fn record(&mut self, migration: &str, epoch: i64, r: &Record) -> Result<(), OnlineError> {
        let phase = r.phase.as_str();
        let (state, message) = match &r.cutover {
            Some((s, m)) => (Some(s.as_str()), Some(m.as_str())),
            None => (None, None),
        };
        let fence_at = r.fence.map(|f| f as i64);
        let paused = r.paused.as_ref().map(|p| p.join("\n"));
        let reinitialized = r.reinitialized.clone().unwrap_or_default();
        let tx = self.transaction().await.map_err(err("record the phase"))?;
        fence::check_pg(&tx, &checkpoint::fences_table(), &fence_of(migration, epoch))
            .await
            .map_err(|e| fenced(e, epoch))?;
        tx.execute(
            &format!(
                "UPDATE {} SET phase = $2, cutover_state = COALESCE($3, cutover_state), \
                 cutover_message = CASE WHEN $3::text IS NULL THEN cutover_message ELSE $4 END, \
                 fence = COALESCE($5, fence), downtime_seconds = COALESCE($6, downtime_seconds), \
                 paused = COALESCE($7, paused), \
                 reinitialize = NULLIF(array_to_string(ARRAY(SELECT l FROM \
                   unnest(string_to_array(COALESCE(reinitialize, ''), E'\\n')) AS l \
                   WHERE l <> '' AND NOT l = ANY($8)), E'\\n'), ''), \
                 updated_at = now() WHERE migration = $1",
                table()
            ),
            &[
                &migration,
                &phase,
                &state,
                &message,
                &fence_at,
                &r.downtime_seconds,
                &paused,
                &reinitialized,
            ],
        )
        .await
        .map_err(err("record the phase"))?;
        tx.commit().await.map_err(err("record the phase"))
    }

    async fn request_reinitialize(&mut self, migration: &str, tables: &[String]) -> Result<(), OnlineError> {
        let Some(row) = self.load(migration).await? else {
            return Err(OnlineError::Setup(format!(
                "migration {migration} has no online state in the target: start it with `run` first"
            )));
        };
        if row.cutover_state.as_deref() == Some(CutoverState::Done.as_str()) {
            return Err(OnlineError::Setup(format!(
                "migration {migration} is cut over already"
            )));
        }
        let text = tables.join("\n");
        self.execute(
            &format!(
                "UPDATE {} SET reinitialize = COALESCE(reinitialize || E'\\n', '') || $2 WHERE migration = $1",
                table()
            ),
            &[&migration, &text],
        )
        .await
        .map_err(err("request the re-copy"))?;
        Ok(())
    }

    async fn mark_requested(&mut self, migration: &str) -> Result<(), OnlineError> {
        self.execute(
            &format!(
                "UPDATE {} SET cutover_state = 'Requested', cutover_message = NULL, \
                 cutover_requested_at = now() WHERE migration = $1",
                table()
            ),
            &[&migration],
        )
        .await
        .map_err(err("request the cutover"))?;
        Ok(())
    }
}
