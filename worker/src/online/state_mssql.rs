//! An online migration's state in a SQL Server target ([`super::state`]): the epoch is the state
//! row's own, raised by each claim and matched by every write of the streaming process.

use super::state::{OnlineRow, OnlineState};
use super::{Control, CutoverState, OnlineError, Position, Progress, Record};
use crate::copy::checkpoint::SCHEMA;
use crate::mssql::connect::TdsClient;

pub fn table() -> String {
    format!("[{SCHEMA}].[online]")
}

fn err(what: &'static str) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
    OnlineError::target(what)
}

async fn exec(ms: &mut TdsClient, what: &'static str, sql: &str) -> Result<(), OnlineError> {
    ms.simple_query(sql)
        .await
        .map_err(err(what))?
        .into_results()
        .await
        .map_err(err(what))?;
    Ok(())
}

/// Creates the state table when missing (the checkpoint tables and schema too).
pub async fn ensure(ms: &mut TdsClient) -> Result<(), OnlineError> {
    crate::mssql::checkpoint::ensure_tables(ms).await?;
    let t = table();
    let sql = format!(
        "IF OBJECT_ID(N'{t}') IS NULL CREATE TABLE {t} (migration nvarchar(400) NOT NULL, \
         epoch bigint NOT NULL, phase nvarchar(32) NOT NULL, slot nvarchar(128) NOT NULL, \
         anchor bigint NOT NULL, applied bigint NOT NULL, source_position bigint NULL, \
         changes bigint NOT NULL, inserts bigint NOT NULL, updates bigint NOT NULL, \
         deletes bigint NOT NULL, truncates bigint NOT NULL, heartbeat_micros bigint NULL, \
         cutover_state nvarchar(32) NULL, cutover_message nvarchar(max) NULL, \
         cutover_requested_at datetime2(3) NULL, fence bigint NULL, downtime_seconds float NULL, \
         updated_at datetime2(3) NOT NULL, paused nvarchar(max) NULL, reinitialize nvarchar(max) NULL, \
         CONSTRAINT [PK__mssqlpg_online] PRIMARY KEY (migration))"
    );
    match ms.simple_query(sql).await {
        Ok(s) => {
            s.into_results().await.map_err(err("create state table"))?;
        }
        // A concurrent worker created it first.
        Err(tiberius::error::Error::Server(e)) if e.code() == 2714 => {}
        Err(e) => return Err(err("create state table")(e)),
    }
    // A state table an earlier version created lacks the re-copy requests.
    exec(
        ms,
        "add the re-copy requests to the state table",
        &format!(
            "IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE object_id = OBJECT_ID(N'{t}') \
             AND name = N'reinitialize') ALTER TABLE {t} ADD reinitialize nvarchar(max) NULL"
        ),
    )
    .await
}

/// Whether the state table exists (reading must not create it).
async fn exists(ms: &mut TdsClient) -> Result<bool, OnlineError> {
    let row = ms
        .simple_query(format!("SELECT OBJECT_ID(N'{}')", table()))
        .await
        .map_err(err("state table lookup"))?
        .into_row()
        .await
        .map_err(err("state table lookup"))?;
    Ok(row.is_some_and(|r| r.get::<i32, _>(0).is_some()))
}

/// A new stream's row: anchored at `anchor`, nothing applied yet, phase `Copying`.
pub async fn init(
    ms: &mut TdsClient,
    migration: &str,
    slot: &str,
    anchor: Position,
) -> Result<(), OnlineError> {
    let anchor = anchor as i64;
    ms.execute(
        format!(
            "DELETE FROM {t} WHERE migration = @P1; \
             INSERT INTO {t} (migration, epoch, phase, slot, anchor, applied, changes, inserts, updates, \
             deletes, truncates, updated_at) \
             VALUES (@P1, 0, N'Copying', @P2, @P3, @P3, 0, 0, 0, 0, 0, SYSUTCDATETIME())",
            t = table()
        ),
        &[&migration, &slot, &anchor],
    )
    .await
    .map_err(err("initialize the state"))?;
    Ok(())
}

/// The migration's row; none before the stream was anchored.
pub async fn load(ms: &mut TdsClient, migration: &str) -> Result<Option<OnlineRow>, OnlineError> {
    if !exists(ms).await? {
        return Ok(None);
    }
    let row = ms
        .query(
            format!(
                "SELECT epoch, phase, slot, anchor, applied, source_position, changes, inserts, updates, \
                 deletes, truncates, heartbeat_micros, cutover_state, cutover_message, fence, \
                 downtime_seconds, DATEDIFF(second, updated_at, SYSUTCDATETIME()), paused, reinitialize \
                 FROM {} WHERE migration = @P1",
                table()
            ),
            &[&migration],
        )
        .await
        .map_err(err("read the state"))?
        .into_row()
        .await
        .map_err(err("read the state"))?;
    Ok(row.map(|r| OnlineRow {
        migration: migration.to_string(),
        epoch: r.get::<i64, _>(0).unwrap_or(0),
        phase: r.get::<&str, _>(1).unwrap_or_default().to_string(),
        slot: r.get::<&str, _>(2).unwrap_or_default().to_string(),
        anchor: r.get::<i64, _>(3).unwrap_or(0) as u64,
        applied: r.get::<i64, _>(4).unwrap_or(0) as u64,
        source_position: r.get::<i64, _>(5).map(|p| p as u64),
        changes: r.get::<i64, _>(6).unwrap_or(0),
        inserts: r.get::<i64, _>(7).unwrap_or(0),
        updates: r.get::<i64, _>(8).unwrap_or(0),
        deletes: r.get::<i64, _>(9).unwrap_or(0),
        truncates: r.get::<i64, _>(10).unwrap_or(0),
        heartbeat_micros: r.get::<i64, _>(11),
        cutover_state: r.get::<&str, _>(12).map(str::to_string),
        cutover_message: r.get::<&str, _>(13).map(str::to_string),
        fence: r.get::<i64, _>(14).map(|p| p as u64),
        downtime_seconds: r.get::<f64, _>(15),
        seconds_since_update: r.get::<i32, _>(16).map(i64::from),
        paused: super::state::paused_list(r.get::<&str, _>(17).map(str::to_string)),
        reinitialize: super::state::paused_list(r.get::<&str, _>(18).map(str::to_string)),
    }))
}

/// Takes the stream over: the epoch moves on, so a streaming process still running with the
/// previous one fails its next batch and stops. Returns the new epoch and the applied position.
pub async fn claim(ms: &mut TdsClient, migration: &str) -> Result<(i64, Position), OnlineError> {
    exec(ms, "claim the stream", "BEGIN TRANSACTION").await?;
    let claimed = async {
        ms.execute(
            format!(
                "UPDATE {} SET epoch = epoch + 1, updated_at = SYSUTCDATETIME() WHERE migration = @P1",
                table()
            ),
            &[&migration],
        )
        .await
        .map_err(err("claim the stream"))?;
        let row = ms
            .query(
                format!("SELECT epoch, applied FROM {} WHERE migration = @P1", table()),
                &[&migration],
            )
            .await
            .map_err(err("claim the stream"))?
            .into_row()
            .await
            .map_err(err("claim the stream"))?;
        row.map(|r| {
            (
                r.get::<i64, _>(0).unwrap_or(0),
                r.get::<i64, _>(1).unwrap_or(0) as u64,
            )
        })
        .ok_or_else(|| {
            OnlineError::Setup(format!(
                "migration {migration}: no online state in the target (the stream was never anchored)"
            ))
        })
    }
    .await;
    match claimed {
        Ok(c) => {
            exec(ms, "claim the stream", "COMMIT TRANSACTION").await?;
            Ok(c)
        }
        Err(e) => {
            let _ = exec(ms, "claim the stream", "ROLLBACK TRANSACTION").await;
            Err(e)
        }
    }
}

/// Records a batch's progress; call it inside the batch's transaction. Fails with
/// [`OnlineError::Fenced`] when the epoch is no longer `epoch`.
pub async fn advance(
    ms: &mut TdsClient,
    migration: &str,
    epoch: i64,
    p: &Progress,
) -> Result<(), OnlineError> {
    let c = &p.counts;
    let (applied, total) = (p.applied as i64, c.total() as i64);
    let (ins, upd, del, tru) = (
        c.inserts as i64,
        c.updates as i64,
        c.deletes as i64,
        c.truncates as i64,
    );
    let source = p.source_position.map(|s| s as i64);
    let result = ms
        .execute(
            format!(
                "UPDATE {} SET applied = @P3, changes = changes + @P4, inserts = inserts + @P5, \
                 updates = updates + @P6, deletes = deletes + @P7, truncates = truncates + @P8, \
                 heartbeat_micros = COALESCE(@P9, heartbeat_micros), \
                 source_position = COALESCE(@P10, source_position), updated_at = SYSUTCDATETIME() \
                 WHERE migration = @P1 AND epoch = @P2",
                table()
            ),
            &[
                &migration,
                &epoch,
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
    if result.rows_affected().iter().sum::<u64>() == 1 {
        Ok(())
    } else {
        Err(fenced(ms, migration, epoch).await)
    }
}

async fn fenced(ms: &mut TdsClient, migration: &str, ours: i64) -> OnlineError {
    match current_epoch(ms, migration).await {
        Ok(found) => OnlineError::Fenced {
            ours,
            found: found.unwrap_or(-1),
        },
        Err(e) => e,
    }
}

async fn current_epoch(ms: &mut TdsClient, migration: &str) -> Result<Option<i64>, OnlineError> {
    let row = ms
        .query(
            format!("SELECT epoch FROM {} WHERE migration = @P1", table()),
            &[&migration],
        )
        .await
        .map_err(err("read the epoch"))?
        .into_row()
        .await
        .map_err(err("read the epoch"))?;
    Ok(row.and_then(|r| r.get::<i64, _>(0)))
}

/// What the streaming process must know between polls; [`OnlineError::Fenced`] once another
/// process claimed the stream.
pub async fn control(ms: &mut TdsClient, migration: &str, epoch: i64) -> Result<Control, OnlineError> {
    let row = ms
        .query(
            format!(
                "SELECT epoch, cutover_state, reinitialize FROM {} WHERE migration = @P1",
                table()
            ),
            &[&migration],
        )
        .await
        .map_err(err("read the state"))?
        .into_row()
        .await
        .map_err(err("read the state"))?;
    let Some(r) = row else {
        return Err(OnlineError::Fenced {
            ours: epoch,
            found: -1,
        });
    };
    let found = r.get::<i64, _>(0).unwrap_or(-1);
    if found != epoch {
        return Err(OnlineError::Fenced { ours: epoch, found });
    }
    Ok(Control {
        cutover_requested: r.get::<&str, _>(1) == Some(CutoverState::Requested.as_str()),
        reinitialize: super::state::paused_list(r.get::<&str, _>(2).map(str::to_string)),
    })
}

/// Records a phase (and the cutover's state) for `status` and `cutover`, under the epoch.
pub async fn record(ms: &mut TdsClient, migration: &str, epoch: i64, r: &Record) -> Result<(), OnlineError> {
    let phase = r.phase.as_str();
    let (state, message) = match &r.cutover {
        Some((s, m)) => (Some(s.as_str()), Some(m.as_str())),
        None => (None, None),
    };
    let fence = r.fence.map(|f| f as i64);
    let paused = r.paused.as_ref().map(|p| p.join("\n"));
    let result = ms
        .execute(
            format!(
                "UPDATE {} SET phase = @P3, cutover_state = COALESCE(@P4, cutover_state), \
                 cutover_message = CASE WHEN @P4 IS NULL THEN cutover_message ELSE @P5 END, \
                 fence = COALESCE(@P6, fence), downtime_seconds = COALESCE(@P7, downtime_seconds), \
                 paused = COALESCE(@P8, paused), updated_at = SYSUTCDATETIME() \
                 WHERE migration = @P1 AND epoch = @P2",
                table()
            ),
            &[
                &migration,
                &epoch,
                &phase,
                &state,
                &message,
                &fence,
                &r.downtime_seconds,
                &paused,
            ],
        )
        .await
        .map_err(err("record the phase"))?;
    if result.rows_affected().iter().sum::<u64>() != 1 {
        return Err(fenced(ms, migration, epoch).await);
    }
    if let Some(done) = &r.reinitialized {
        // The requests left: a request written meanwhile changes the column, and is kept by
        // reading again.
        loop {
            let now = requests(ms, migration).await?;
            let kept: Vec<String> = super::state::paused_list(now.clone())
                .into_iter()
                .filter(|t| !done.contains(t))
                .collect();
            let kept = (!kept.is_empty()).then(|| kept.join("\n"));
            let changed = ms
                .execute(
                    format!(
                        "UPDATE {} SET reinitialize = @P2 WHERE migration = @P1 \
                         AND (reinitialize = @P3 OR (reinitialize IS NULL AND @P3 IS NULL))",
                        table()
                    ),
                    &[&migration, &kept, &now],
                )
                .await
                .map_err(err("record the tables copied again"))?;
            if changed.rows_affected().iter().sum::<u64>() == 1 {
                break;
            }
        }
    }
    Ok(())
}

/// The re-copy requests' column as it is.
async fn requests(ms: &mut TdsClient, migration: &str) -> Result<Option<String>, OnlineError> {
    let row = ms
        .query(
            format!("SELECT reinitialize FROM {} WHERE migration = @P1", table()),
            &[&migration],
        )
        .await
        .map_err(err("read the re-copy requests"))?
        .into_row()
        .await
        .map_err(err("read the re-copy requests"))?;
    Ok(row.and_then(|r| r.get::<&str, _>(0).map(str::to_string)))
}

/// Appends re-copy requests (the row exists and is not cut over).
pub async fn request_reinitialize(
    ms: &mut TdsClient,
    migration: &str,
    tables: &[String],
) -> Result<(), OnlineError> {
    let Some(row) = load(ms, migration).await? else {
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
    ms.execute(
        format!(
            "UPDATE {} SET reinitialize = CASE WHEN reinitialize IS NULL THEN @P2 \
             ELSE reinitialize + NCHAR(10) + @P2 END WHERE migration = @P1",
            table()
        ),
        &[&migration, &text.as_str()],
    )
    .await
    .map_err(err("request the re-copy"))?;
    Ok(())
}

/// Marks the cutover requested.
pub async fn mark_requested(ms: &mut TdsClient, migration: &str) -> Result<(), OnlineError> {
    ms.execute(
        format!(
            "UPDATE {} SET cutover_state = N'Requested', cutover_message = NULL, \
             cutover_requested_at = SYSUTCDATETIME() WHERE migration = @P1",
            table()
        ),
        &[&migration],
    )
    .await
    .map_err(err("request the cutover"))?;
    Ok(())
}

impl OnlineState for TdsClient {
    async fn ensure(&mut self) -> Result<(), OnlineError> {
        ensure(self).await
    }

    async fn load(&mut self, migration: &str) -> Result<Option<OnlineRow>, OnlineError> {
        load(self, migration).await
    }

    async fn init(&mut self, migration: &str, slot: &str, anchor: Position) -> Result<(), OnlineError> {
        init(self, migration, slot, anchor).await
    }

    async fn claim(&mut self, migration: &str) -> Result<(i64, Position), OnlineError> {
        claim(self, migration).await
    }

    async fn control(&mut self, migration: &str, epoch: i64) -> Result<Control, OnlineError> {
        control(self, migration, epoch).await
    }

    async fn record(&mut self, migration: &str, epoch: i64, r: &Record) -> Result<(), OnlineError> {
        record(self, migration, epoch, r).await
    }

    async fn mark_requested(&mut self, migration: &str) -> Result<(), OnlineError> {
        mark_requested(self, migration).await
    }

    async fn request_reinitialize(&mut self, migration: &str, tables: &[String]) -> Result<(), OnlineError> {
        request_reinitialize(self, migration, tables).await
    }
}
