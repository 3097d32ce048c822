//! `target.postgres.unlogged`: rows of an UNLOGGED target table that PostgreSQL's crash recovery
//! emptied while the (logged) checkpoints still count them. Checked whenever a copy attempt starts
//! (a transient-fault retry after a crash included), at prepare and before finalize switches the
//! table to LOGGED: resuming would skip the lost rows.

use crate::copy::checkpoint::{CheckpointError, SCHEMA};
use tokio_postgres::Client;

/// Tasks of a table created UNLOGGED whose committed rows PostgreSQL's crash recovery emptied.
///
/// Crash recovery resets every UNLOGGED table (after a clean shutdown they keep their rows), the
/// worker's `unlogged_marks` among them, while the checkpoints, which are logged, still count the
/// rows. Each attempt of a task marks it there before it commits ([`mark_unlogged`]), so a task
/// whose checkpoint counts rows and whose mark is gone lost them; one that started again after the
/// crash has marked itself anew. `tasks` are the table's tasks: a crash empties the whole table.
pub async fn unlogged_lost(
    client: &Client,
    migration: &str,
    tasks: &[String],
) -> Result<Vec<(String, i64)>, CheckpointError> {
    Ok(client
        .query(
            &format!(
                "SELECT c.task, c.rows FROM \"{SCHEMA}\".\"checkpoints\" c \
                 WHERE c.migration = $1 AND c.task = ANY($2) AND c.rows > 0 \
                   AND NOT EXISTS (SELECT 1 FROM \"{SCHEMA}\".\"unlogged_marks\" m \
                                   WHERE m.migration = c.migration AND m.task = c.task) \
                 ORDER BY c.task"
            ),
            &[&migration, &tasks],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// Marks `task` as copying into an UNLOGGED table since the last crash (see [`unlogged_lost`]);
/// before its first commit of an attempt.
pub async fn mark_unlogged(client: &Client, migration: &str, task: &str) -> Result<(), CheckpointError> {
    client
        .execute(
            &format!(
                "INSERT INTO \"{SCHEMA}\".\"unlogged_marks\" (migration, task) VALUES ($1, $2) \
                 ON CONFLICT DO NOTHING"
            ),
            &[&migration, &task],
        )
        .await?;
    Ok(())
}

/// Rows of an UNLOGGED table that PostgreSQL's crash recovery emptied while the checkpoints still
/// count them: resuming would skip them, so the table must be copied again from the start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "table {table} was created UNLOGGED (target.postgres.unlogged) and PostgreSQL's crash recovery \
     emptied it: the {rows} rows its tasks ({tasks}) had committed are gone, though their checkpoints \
     still count them. Copy it again from the start: run the plan step again, which starts the copy \
     over (locally `mssql-pg-worker run -f FILE`, or `prepare` then `copy`; in Kubernetes delete the \
     Migration and apply it again); without `unlogged` a crash loses no committed row"
)]
pub struct UnloggedLost {
    pub table: String,
    pub tasks: String,
    pub rows: i64,
}

impl UnloggedLost {
    /// The loss `unlogged_lost` found for `table`, if any.
    pub fn of(table: &str, lost: &[(String, i64)]) -> Option<UnloggedLost> {
        if lost.is_empty() {
            return None;
        }
        Some(UnloggedLost {
            table: table.to_string(),
            tasks: lost
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            rows: lost.iter().map(|(_, r)| r).sum(),
        })
    }
}

/// Whether `qualified` (a quoted `"schema"."table"`) is an UNLOGGED table.
pub async fn is_unlogged(client: &Client, qualified: &str) -> Result<bool, CheckpointError> {
    Ok(client
        .query_opt(
            "SELECT relpersistence = 'u' FROM pg_class WHERE oid = to_regclass($1)",
            &[&qualified],
        )
        .await?
        .is_some_and(|r| r.get(0)))
}
